"""A mixed corpus of single-send requests for the plain-send parity tests: the sends producers send most (plain,
with and without UNIQ_KEY, V1 and V2, oneway) interleaved with every kind the general path must take or refuse
(delay, transaction, timer, WAIT=false, retry topic, batch flag, random or illegal queue, unknown, illegal, forbidden
or read-only topic, bad or missing header fields, duplicate properties, a ROCKETMQ-serialized header, an oversized
body, a SEND_BATCH_MESSAGE in between). Seeded: the same list for the same seed."""

from __future__ import annotations

import random

from rmq_core.message import Message
from rmq_core.message_encoding import encode_batch, properties_to_string
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RPC_ONEWAY, RemotingCommand

from support.send_helpers import send_request

PLAIN_TOPIC = "ParityPlain"
MULTI_TAG_TOPIC = "ParityMultiTag"
READ_ONLY_TOPIC = "ParityReadOnly"
MAX_MESSAGE_SIZE = 2048


def _props(rng: random.Random, i: int, **extra: str) -> str:
    p = {"TAGS": rng.choice(["TagA", "TagB", "标签"]), "KEYS": f"k{i}", "WAIT": "true", "UNIQ_KEY": f"{i:032X}"}
    p.update(extra)
    return properties_to_string({k: v for k, v in p.items() if v != "-"})


def _kinds(rng: random.Random, i: int) -> dict[str, RemotingCommand]:
    body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 17, 300])))
    born = 1_700_000_000_000 + i
    q = rng.randrange(4)
    v2 = RequestCode.SEND_MESSAGE_V2

    def send(topic: str = PLAIN_TOPIC, code: int = v2, props: str | None = None, **kw: object) -> RemotingCommand:
        kw.setdefault("queue_id", q)
        kw.setdefault("born_timestamp", born)
        return send_request(topic, body, code=code, properties=_props(rng, i) if props is None else props, **kw)

    oneway = send()
    oneway.flag |= RPC_ONEWAY
    rocketmq = send()
    rocketmq.serialize_type = 1
    bad_int = send()
    bad_int.ext_fields["g"] = "12x"
    missing = send()
    del missing.ext_fields["a"]
    spaced = send()
    spaced.ext_fields["e"] = f" {q}"  # Python's int() takes it; the plain reader leaves it to the general path
    bad_max = send()
    bad_max.ext_fields["l"] = "many"
    no_body = send()
    no_body.body = None
    batch = RemotingCommand.request(
        RequestCode.SEND_BATCH_MESSAGE,
        dict(send().ext_fields, m="true"),
        encode_batch([Message(PLAIN_TOPIC, b"b1"), Message(PLAIN_TOPIC, b"b2")]),
    )
    return {
        "plain": send(),
        "plain_flags": send(flag=rng.randrange(1 << 16), sys_flag=rng.choice([0, 1, 4, 8, 12]), reconsume_times=3),
        "no_uniq": send(props=_props(rng, i, UNIQ_KEY="-")),
        "no_properties": send(props=""),
        "v1": send(code=RequestCode.SEND_MESSAGE),
        "cluster_set": send(props=_props(rng, i, CLUSTER="other")),
        "multi_tag": send(MULTI_TAG_TOPIC),
        "oneway": oneway,
        "unit_mode": send(unit_mode=True),
        "malformed_props": send(props="\x02ab\x02\x01x\x02UNIQ_KEY\x01u" + str(i) + "\x02k\x01\x02"),
        "duplicate_props": send(props=_props(rng, i) + "TAGS\x01again\x02"),
        "wait_false": send(props=_props(rng, i, WAIT="false")),
        "delay": send(props=_props(rng, i, DELAY="2")),
        "bad_delay": send(props=_props(rng, i, DELAY="x")),
        "transaction": send(props=_props(rng, i, TRAN_MSG="true", PGROUP="PG")),
        "timer": send(props=_props(rng, i, TIMER_DELAY_SEC="5")),
        "retry_topic": send("%RETRY%NoSuchGroup"),
        "batch_flag": send(batch=True),
        "random_queue": send(queue_id=-1),
        "illegal_queue": send(queue_id=99),
        "new_topic": send(f"ParityNew{i % 3}"),
        "illegal_topic": send("bad topic!"),
        "forbidden_topic": send("SCHEDULE_TOPIC_XXXX"),
        "read_only_topic": send(READ_ONLY_TOPIC),
        "oversized": send(props=_props(rng, i)) if len(body) > 0 else send(),
        "bad_int": bad_int,
        "missing_field": missing,
        "spaced_int": spaced,
        "bad_max_reconsume": bad_max,
        "no_body": no_body,
        "rocketmq_header": rocketmq,
        "batch": batch,
    }


def send_corpus(seed: int, n: int = 160) -> list[RemotingCommand]:
    """``n`` requests, about half plain sends, the rest every other kind in a random order; opaques 1..n."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kinds = _kinds(rng, i)
        name = "plain" if rng.random() < 0.5 else rng.choice(sorted(kinds))
        req = kinds[name]
        if name == "oversized":
            req.body = bytes(MAX_MESSAGE_SIZE + 1)
        req.opaque = i + 1
        out.append(req)
    return out


def _batch_kinds(rng: random.Random, i: int) -> dict[str, RemotingCommand]:
    q = rng.randrange(4)

    def batch(
        topic: str = PLAIN_TOPIC, body: bytes | None = None, props: str | None = None, **kw: object
    ) -> RemotingCommand:
        kw.setdefault("queue_id", q)
        kw.setdefault("born_timestamp", 1_700_000_000_000 + i)
        if body is None:
            body = encode_batch([Message(topic, f"b{i}.{j}".encode(), tags="TagA") for j in range(rng.randrange(1, 4))])
        props = properties_to_string({"WAIT": "true"}) if props is None else props
        return send_request(topic, body, code=RequestCode.SEND_BATCH_MESSAGE, properties=props, batch=True, **kw)

    bad_int = batch()
    bad_int.ext_fields["g"] = "12x"
    return {
        "good": batch(),
        "multi_tag": batch(MULTI_TAG_TOPIC),
        "random_queue": batch(queue_id=-1),
        "illegal_queue": batch(queue_id=99),
        "retry_topic": batch("%RETRY%G"),
        "transaction": batch(sys_flag=4),
        "delay": batch(props=properties_to_string({"DELAY": "2"})),
        "oversized": batch(body=bytes(MAX_MESSAGE_SIZE + 1)),
        "malformed": batch(body=b"\x00\x00\x00\x10garbage"),
        "empty": batch(body=b""),
        "new_topic": batch(f"ParityBatchNew{i % 3}"),
        "illegal_topic": batch("bad topic!"),
        "forbidden_topic": batch("SCHEDULE_TOPIC_XXXX"),
        "read_only_topic": batch(READ_ONLY_TOPIC),
        "bad_int": bad_int,
    }


def batch_corpus(seed: int, n: int = 40) -> list[RemotingCommand]:
    """``n`` SEND_BATCH_MESSAGE requests only (what ``process_batch`` answers at once under ASYNC_FLUSH): good batches
    interleaved with every kind a batch check refuses (retry topic, transaction sysFlag, DELAY, oversized, malformed
    or empty body, bad queue, unknown, illegal, forbidden or read-only topic, a bad header field); opaques 1..n."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kinds = _batch_kinds(rng, i)
        name = "good" if rng.random() < 0.5 else rng.choice(sorted(kinds))
        req = kinds[name]
        req.opaque = i + 1
        out.append(req)
    return out
