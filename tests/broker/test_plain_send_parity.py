"""The plain-send path (``SendMessageProcessor.process_batch``: a chunk's plain sends read into columns by the store
engine, checked once per key, stored with one ``put_send_requests``, answered as encoded frames) gives exactly what
the general path (``_process_general``: one check, ``Message`` and answer object per send) gives for the same chunk:
the same answer frames, the same CommitLog records in the same order, the same put stats. The corpus mixes plain
sends with every kind the general path must take or refuse (``support/send_corpus.py``). Both runs use the same
seeded random queue choice; what differs by nature is blanked: the store host (each broker its own port) in msgIds
and records, the store timestamp, a timer message's due time, and the value of a UNIQ_KEY the store assigned (time-based;
checked well-formed and distinct)."""

from __future__ import annotations

import asyncio
import random
import re
import struct
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.perm_name import PERM_READ
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import decode_messages
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.frame_codec import encode_frames, split_frames

from support.admin_helpers import add_topic_config
from support.send_corpus import MAX_MESSAGE_SIZE, MULTI_TAG_TOPIC, READ_ONLY_TOPIC, batch_corpus, send_corpus
from support.send_helpers import SMALL_FILES

_UNIQ = re.compile(r"[0-9A-F]{32}")
# the store host (127.0.0.1, the broker's port) of an IPv4 offset msg id: ip (8 hex), port (8 hex), then the offset
_MSG_ID_HOST = re.compile(rb"7F000001[0-9A-F]{8}(?=[0-9A-F]{16})")


class _Conn:
    remote_address = "127.0.0.1:40001"


def _frames(requests: list[RemotingCommand], responses: list[Any]) -> list[bytes | None]:
    """Each answer's frame as the server writes it (``batch_serving.process_batch``), None where none is sent."""
    out: list[bytes | None] = []
    for cmd, response in zip(requests, responses):
        if response is None or cmd.is_oneway:
            out.append(None)
            continue
        if response.__class__ is not bytes:
            response.opaque = cmd.opaque
            response.flag |= 1
            response.serialize_type = cmd.serialize_type
        out.append(_MSG_ID_HOST.sub(b"<store host>", encode_frames([response])))
    return out


def _wire(requests: list[RemotingCommand]) -> list[RemotingCommand]:
    """The requests as the server reads them off the wire (one chunk through the frame codec)."""
    cmds, _, error = split_frames(bytearray(encode_frames(requests)))
    assert error is None and len(cmds) == len(requests)
    return cmds


def _run(tmp_path, name: str, requests: list[RemotingCommand], plain_path: bool) -> dict[str, Any]:
    cfg = BrokerConfig(
        listen_port=0,
        store_path_root_dir=str(tmp_path / name),
        max_message_size=MAX_MESSAGE_SIZE,
        message_delay_level="1s 2s 3s",
        **SMALL_FILES,
    )
    with Broker(cfg) as b:
        add_topic_config(b, TopicConfig(MULTI_TAG_TOPIC, topic_filter_type="MULTI_TAG"))
        add_topic_config(b, TopicConfig(READ_ONLY_TOPIC, perm=PERM_READ))
        proc = b.controller.send_message_processor
        proc._random = random.Random(5)

        at_once: list[bool] = []

        async def go() -> list[Any]:
            if plain_path:
                answers = proc.process_batch(_Conn(), requests)  # type: ignore[arg-type]
                at_once.append(isinstance(answers, list))
                return answers if isinstance(answers, list) else await answers
            responses: list[Any] = [None] * len(requests)
            await proc._process_general(_Conn(), requests, range(len(requests)), responses)  # type: ignore[arg-type]
            return responses

        responses = asyncio.run_coroutine_threadsafe(go(), b.controller.loop).result(30)
        store = b.message_store
        raw = store.read_commit_log(0, store.max_physical_offset) or b""
        stats = b.controller.broker_stats_manager._table
        return {
            "frames": _frames(requests, responses),
            "records": decode_messages(raw, decompress=False),
            "sizes": [len(raw)],
            "stats": {
                name: {k: (v.value, v.times) for k, v in t.items()} for name, t in stats.items() if "PUT" in name
            },
            "plain": sum(1 for k in proc._plain_fast_path.read(requests).key_of if k >= 0),
            "at_once": at_once == [True],
        }


def _comparable(records: list[Any], sent_uniq: set[str]) -> list[tuple[Any, ...]]:
    out = []
    for m in records:
        props = dict(m.properties)
        uniq = props.get("UNIQ_KEY")
        if uniq is not None and uniq not in sent_uniq:
            assert _UNIQ.fullmatch(uniq), uniq
            props["UNIQ_KEY"] = "<assigned>"
        if "TIMER_OUT_MS" in props:  # a timer message's due time: now + its delay (taken by the general path)
            props["TIMER_OUT_MS"] = "<now + delay>"
        out.append(
            (
                m.topic,
                m.queue_id,
                m.queue_offset,
                m.commitlog_offset,
                m.store_size,
                m.flag,
                m.sys_flag,
                m.born_timestamp,
                m.born_host,
                m.reconsume_times,
                m.body,
                props,
            )
        )
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_plain_path_stores_and_answers_what_the_general_path_does(tmp_path, seed):
    fast = _run(tmp_path, "plain", _wire(send_corpus(seed)), plain_path=True)
    general = _run(tmp_path, "general", _wire(send_corpus(seed)), plain_path=False)
    assert fast["plain"] > 60  # the corpus really exercises the plain path (about half its sends)
    assert fast["frames"] == general["frames"]
    sent_uniq = {m.properties.get("UNIQ_KEY") for m in fast["records"]} & {
        req.ext_fields.get("i", "")
        and dict(kv.split("\x01", 1) for kv in req.ext_fields.get("i", "").split("\x02") if "\x01" in kv).get(
            "UNIQ_KEY"
        )
        for req in send_corpus(seed)
        if req.ext_fields
    }
    assert _comparable(fast["records"], sent_uniq) == _comparable(general["records"], sent_uniq)
    assigned = [m.properties["UNIQ_KEY"] for m in fast["records"] if m.properties.get("UNIQ_KEY") not in sent_uniq]
    assert assigned and len(set(assigned)) == len(assigned)
    assert fast["stats"] == general["stats"]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_chunk_of_batch_sends_answered_at_once_is_what_the_general_path_gives(tmp_path, seed):
    """A chunk of SEND_BATCH_MESSAGEs only, under ASYNC_FLUSH, is answered at once (``_send_batch_now``, no
    coroutine): the same answers, records and put stats as each through ``process_request``."""
    fast = _run(tmp_path, "plain", _wire(batch_corpus(seed)), plain_path=True)
    general = _run(tmp_path, "general", _wire(batch_corpus(seed)), plain_path=False)
    assert fast["at_once"] and fast["plain"] == 0
    assert len(fast["records"]) > 10  # good batches were stored, not only refused
    assert fast["frames"] == general["frames"]
    assert _comparable(fast["records"], set()) == _comparable(general["records"], set())
    assert fast["stats"] == general["stats"]


def test_answers_frames_decode_to_the_general_answers(tmp_path):
    """The frames are RemotingCommands a client decodes (length prefix and header length consistent)."""
    fast = _run(tmp_path, "plain", _wire(send_corpus(9, n=40)), plain_path=True)
    for frame in fast["frames"]:
        if frame is None:
            continue
        frame = frame.replace(b"<store host>", b"0" * 16)
        (length,) = struct.unpack(">i", frame[:4])
        assert length == len(frame) - 4
        cmd = RemotingCommand.decode_frame(frame[4:])
        assert cmd.flag & 1 and "MSG_REGION" in cmd.ext_fields
