"""RocketMQ's C++ client (the PyPI ``rocketmq`` 0.4.4 package, ``librocketmq.so`` via ctypes) against rmq_core's
NameServer and Broker over real TCP.

Each C++ client runs in its own process (``compat/cpp/cpp_client.py``: the library has global state and its own
threads) with ``HOME`` in ``tmp_path`` (its logs go to ``$HOME/logs/rocketmq-cpp``). The client reaches the name
server and the broker through ``compat/tools/remoting_proxy.py``, whose frame log lets the tests check the wire
itself: the C++ client re-filters pulled messages by tag, so broker-side filtering is visible only there, and it
needs JSON responses whose extFields are strings (``compat/cpp/WIRE_NOTES.md``).

Behaviours: sync send (status OK, UNIQ_KEY msg ids, queue offsets), a clustering push consumer subscribed to
"TagA || TagC" (exactly the matching messages, bodies, keys, user properties intact; offsets committed so a second
consumer of the group gets nothing), and the pull consumer (every matching message from every queue), both for a
topic auto-created from TBW102 by the first send and for a topic created beforehand with 8 queues. The same scenario
runs against Apache RocketMQ 4.9.7 (``tests/support/apache_rocketmq.py``; also marked ``apache_broker``) as the reference.

Run alone with ``pytest -m compat_cpp`` (rmq_core only: ``-m "compat_cpp and not apache_broker"``). Needs
``pip install rocketmq==0.4.4`` (a manylinux1 x86_64 wheel; no system packages); a missing package on Linux x86_64
is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.message import decode_messages
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

pytestmark = pytest.mark.compat_cpp

ROOT = Path(__file__).resolve().parents[2]
CPP_CLIENT = ROOT / "compat" / "cpp" / "cpp_client.py"
sys.path.insert(0, str(ROOT / "compat" / "cpp"))
sys.path.insert(0, str(ROOT / "compat" / "tools"))
from cpp_client import expected  # noqa: E402
from remoting_proxy import RemotingProxy  # noqa: E402

from support.admin_helpers import create_topic, wait_for_route  # noqa: E402
from support.apache_rocketmq import apache_rocketmq  # noqa: E402, F401  (the module-scoped fixture)

N = 12  # messages produced: tags cycle TagA, TagB, TagC
EXPRESSION = "TagA || TagC"
MATCHING = [i for i in range(N) if expected(i)["tag"] in ("TagA", "TagC")]
PROCESS_TIMEOUT_S = 90


def _require_package() -> None:
    """The wheel bundling librocketmq.so exists for manylinux x86_64 only (elsewhere pip installs an sdist without
    the library): skip on other platforms, fail when it is missing on Linux x86_64."""
    if not (sys.platform == "linux" and platform.machine() == "x86_64"):
        pytest.skip(
            f"PyPI rocketmq 0.4.4 bundles its C++ library for Linux x86_64 only, not {sys.platform}/"
            f"{platform.machine()}"
        )
    if importlib.util.find_spec("rocketmq") is None:
        pytest.fail("the C++ client is not installed: pip install rocketmq==0.4.4")


# --- fixtures ------------------------------------------------------------------------------------------------
class Cluster:
    """A name server and a broker (rmq_core's or Apache's), each behind the logging proxy; ``namesrv`` is the
    proxied name-server address the C++ client is given, ``ns_addr``/``broker_addr`` the real ones."""

    def __init__(self, ns_addr: str, broker_addr: str, proxy: RemotingProxy, namesrv: str, home: Path) -> None:
        self.ns_addr, self.broker_addr, self.proxy, self.namesrv, self.home = ns_addr, broker_addr, proxy, namesrv, home

    def run(self, *args: str) -> list[dict[str, Any]]:
        """Run ``cpp_client.py`` with ``args`` and return its JSON lines; a non-zero exit fails with its output
        and the tail of the C++ client's log."""
        env = {**os.environ, "HOME": str(self.home), "PYTHONIOENCODING": "utf-8"}
        proc = subprocess.run(
            [sys.executable, str(CPP_CLIENT), *args, "--namesrv", self.namesrv],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            timeout=PROCESS_TIMEOUT_S,
        )
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            pytest.fail(
                f"cpp_client {args[0]} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                f"stderr:\n{proc.stderr}\nC++ client log (tail):\n{self.cpp_log_tail()}\n"
                f"wire (tail):\n{self.wire_tail()}"
            )
        return lines

    def wire_tail(self, n: int = 40) -> str:
        out = []
        for r in self.proxy.records()[-n:]:
            h = r.get("header")
            if h is None:
                out.append(json.dumps(r))
            else:
                ext = h.get("extFields") or {}
                out.append(
                    f"{r['route']}#{r['conn']} {r['dir']} code={h.get('code')} opaque={h.get('opaque')} "
                    f"remark={h.get('remark')!r} topic={ext.get('topic')} queueId={ext.get('queueId')} "
                    f"body_len={r.get('body_len')}"
                )
        return "\n".join(out)

    def cpp_log_tail(self, n: int = 40) -> str:
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*rocketmq-cpp.log*"), key=os.path.getmtime)
        return "\n".join(logs[-1].read_text(errors="replace").splitlines()[-n:]) if logs else "(no log)"

    def frames(self) -> list[dict[str, Any]]:
        return [r for r in self.proxy.records() if "header" in r]


def _invoke(client: BlockingRemotingClient, addr: str, code: int, ext: dict[str, Any]) -> RemotingCommand:
    return client.invoke_sync(addr, RemotingCommand.request(code, ext), timeout=5.0)


@contextmanager
def _proxied(ns_addr: str, broker_addr: str, tmp_path: Path) -> Iterator[Cluster]:
    proxy = RemotingProxy(str(tmp_path / "wire.jsonl"))
    ns_route = proxy.add_route(ns_addr, name="namesrv")
    proxy.add_route(broker_addr, name="broker")
    with proxy:
        wait_for_route(ns_addr, "TBW102", timeout=30)  # readiness, not speed
        home = tmp_path / "cpp-home"
        home.mkdir()
        yield Cluster(ns_addr, broker_addr, proxy, ns_route.address, home)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """rmq_core's NameServer and Broker, in this process."""
    _require_package()
    ns = NameServer(listen_port=0).start()
    try:
        cfg = BrokerConfig(
            listen_port=0,
            namesrv_addr=ns.address,
            broker_name="broker-cpp",
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=4 * 1024 * 1024,
            mapped_file_size_consume_queue=6000,
        )
        with Broker(cfg) as broker, _proxied(ns.address, broker.address, tmp_path) as c:
            yield c
    finally:
        ns.shutdown()


@pytest.fixture
def apache_cluster(apache_rocketmq: tuple[str, str], tmp_path: Path) -> Iterator[Cluster]:  # noqa: F811
    """Apache RocketMQ 4.9.7 (tests/support/apache_rocketmq.py, one pair per module): the reference for the same checks."""
    _require_package()
    with _proxied(*apache_rocketmq, tmp_path) as c:
        yield c


# --- the scenario ----------------------------------------------------------------------------------------------
def _check_received(msgs: list[dict[str, Any]], topic: str, sent: dict[int, dict[str, Any]]) -> None:
    """Exactly the matching messages, once each, with everything the producer set."""
    by_idx = Counter(int(m["properties"]["idx"]) for m in msgs)
    assert sorted(by_idx) == MATCHING and set(by_idx.values()) == {1}, by_idx
    for m in msgs:
        i = int(m["properties"]["idx"])
        exp = expected(i)
        assert m["topic"] == topic
        assert m["tags"] == exp["tag"] and m["properties"]["TAGS"] == exp["tag"]
        assert m["keys"] == exp["keys"] and m["properties"]["KEYS"] == exp["keys"]
        assert m["body"] == exp["body"]
        assert {k: m["properties"][k] for k in exp["properties"]} == exp["properties"]
        assert m["id"] == sent[i]["msg_id"] == m["properties"]["UNIQ_KEY"]
        assert m["queue_offset"] == sent[i]["offset"]
        assert m["reconsume_times"] == 0
        assert m["store_timestamp"] >= m["born_timestamp"] > 0


def _check_wire(cluster: Cluster, groups: set[str]) -> None:
    """What the C++ client needs from our servers, and what it cannot check itself (broker-side tag filtering)."""
    frames = cluster.frames()
    assert frames, "nothing went through the proxy"
    requests = {(r["route"], r["conn"], r["header"]["opaque"]): r for r in frames if r["dir"] == "c2s"}
    assert all(r["header"]["language"] == "CPP" for r in requests.values())
    pulled_tags: Counter[str] = Counter()
    for r in frames:
        if r["dir"] != "s2c":
            continue
        h = r["header"]
        assert r["serialize"] == "JSON", r  # the C++ client reads the whole length word as the JSON length
        if not h["flag"] & 1:
            continue  # a server-initiated request (NOTIFY_CONSUMER_IDS_CHANGED)
        req = requests.get((r["route"], r["conn"], h["opaque"]))
        assert req is not None, f"a response nobody asked for: {h}"
        code = req["header"]["code"]
        if code in (RequestCode.SEND_MESSAGE, RequestCode.PULL_MESSAGE, RequestCode.QUERY_CONSUMER_OFFSET):
            ext = h.get("extFields")
            assert isinstance(ext, dict), f"response to {code} without extFields: {h}"  # NULL header: a crash
            assert all(isinstance(v, str) for v in ext.values()), h
        if code == RequestCode.PULL_MESSAGE and h["code"] == ResponseCode.SUCCESS:
            assert req["header"]["extFields"]["consumerGroup"] in groups
            body = bytes.fromhex(r["body_hex"]) if "body_hex" in r else r.get("body", "").encode("utf-8")
            pulled_tags.update(m.properties.get("TAGS", "") for m in decode_messages(body))
    # every message pulled by the consumers matched the subscription on the broker side
    assert set(pulled_tags) == {"TagA", "TagC"}, pulled_tags
    assert sum(pulled_tags.values()) >= len(MATCHING)


def _create_topic(cluster: Cluster, topic: str, queues: int) -> None:
    create_topic(cluster.broker_addr, topic, queues, perm=PERM_READ | PERM_WRITE)
    wait_for_route(cluster.ns_addr, topic, timeout=30)


def _scenario(cluster: Cluster, create_first: bool, prime_offsets: bool = False) -> None:
    """Produce, push-consume, check commits and no redelivery, pull-consume, check the wire. ``prime_offsets``
    commits offset 0 of queue 0 for the push group before it starts (same answer the broker gives anyway); see
    ``test_cpp_sync_send_push_and_pull_on_apache`` for why Apache needs it."""
    topic = "CppTopicCreated" if create_first else "CppTopicAuto"
    queues = 8 if create_first else 4  # the C++ producer auto-creates with defaultTopicQueueNums = 4
    if create_first:
        _create_topic(cluster, topic, queues)

    # sync send
    out = cluster.run("produce", "--topic", topic, "--group", f"{topic}_pg", "--count", str(N))
    sent = {e["i"]: e for e in out if e["event"] == "sent"}
    assert sorted(sent) == list(range(N)), out
    # The C++ client's own connect race (apache/rocketmq-client-cpp#455) can fail the first send, before its
    # heartbeat thread has connected to the broker; it is retried once. Any later retry is a real failure.
    retried = [e["i"] for e in out if e["event"] == "retry"]
    assert retried in ([], [0]), out
    assert all(e["status"] == "OK" for e in sent.values())
    ids = [e["msg_id"] for e in sent.values()]
    assert len(set(ids)) == N and all(len(x) == 32 and set(x) <= set("0123456789ABCDEF") for x in ids)  # UNIQ_KEYs
    offsets = Counter(e["offset"] for e in sent.values())  # queue offsets; the C API does not report the queue id
    assert sorted(offsets) == list(range(len(offsets))) and max(offsets.values()) <= queues, offsets

    if prime_offsets:
        with BlockingRemotingClient() as c:
            r = _invoke(
                c,
                cluster.broker_addr,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": f"{topic}_cg", "topic": topic, "queueId": 0, "commitOffset": 0},
            )
            assert r.code == ResponseCode.SUCCESS, r.remark

    # push consumer, "TagA || TagC": exactly the matching messages
    out = cluster.run(
        "push",
        "--topic",
        topic,
        "--group",
        f"{topic}_cg",
        "--expression",
        EXPRESSION,
        "--expect",
        str(len(MATCHING)),
        "--timeout",
        "30",
        "--idle",
        "1.0",
    )
    received = [e for e in out if e["event"] == "received"]
    _check_received(received, topic, sent)
    assert {m["queue_id"] for m in received} <= set(range(queues))

    # the consumed offsets were committed: the group's next consumer gets nothing again
    with BlockingRemotingClient() as c:
        for m in received:
            r = _invoke(
                c,
                cluster.broker_addr,
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": f"{topic}_cg", "topic": topic, "queueId": m["queue_id"]},
            )
            assert r.code == ResponseCode.SUCCESS and int(r.ext_fields["offset"]) > m["queue_offset"], r
    out = cluster.run(
        "push", "--topic", topic, "--group", f"{topic}_cg", "--expression", EXPRESSION, "--expect", "0", "--idle", "1.5"
    )
    assert [e for e in out if e["event"] == "received"] == []

    # pull consumer: every queue from offset 0, filtered
    out = cluster.run("pull", "--topic", topic, "--group", f"{topic}_pull", "--expression", EXPRESSION)
    pulled = [e for e in out if e["event"] == "received"]
    _check_received(pulled, topic, sent)

    _check_wire(cluster, {f"{topic}_cg", f"{topic}_pull"})


CREATE_FIRST = pytest.mark.parametrize("create_first", [False, True], ids=["auto-created", "created-8-queues"])


@CREATE_FIRST
def test_cpp_sync_send_push_and_pull(cluster: Cluster, create_first: bool) -> None:
    _scenario(cluster, create_first)


@pytest.mark.apache_broker
@CREATE_FIRST
def test_cpp_sync_send_push_and_pull_on_apache(apache_cluster: Cluster, create_first: bool) -> None:
    """The same checks against Apache RocketMQ: what the test expects of rmq_core is Apache's behaviour.

    Apache 4.9.7 loses offsets when the first commits of a new topic@group arrive concurrently
    (``ConsumerOffsetManager#commitOffset`` does get-then-put of the per-key map; UPDATE_CONSUMER_OFFSET runs on a
    thread pool), and the C++ client commits every queue at once at shutdown: one commit is sometimes lost and the
    group's next consumer gets that queue's messages again. One commit before the consumer starts creates the map.
    """
    _scenario(apache_cluster, create_first, prime_offsets=True)
