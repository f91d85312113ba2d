"""RocketMQ's 5.x Go SDK (rocketmq-clients golang/v5, TLS: the SDK always dials TLS) and Node.js SDK
(rocketmq-client-nodejs, plaintext) against rmq_core's gRPC endpoint, and the same drivers against Apache 5.3.3's
broker + proxy (the control, ``support.apache_proxy``). Each driver runs every scenario in one process (compat/go5,
compat/node5; ``support.sdk5_polyglot``): Producer normal/FIFO/delay; SimpleConsumer ack → no redelivery, no ack →
redelivered with delivery attempt 2, change invisible duration to 1 s → back first, attempt 2; FIFO order per
message group; delay arrival; Node's PushConsumer. The assertions are the same for both brokers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.apache_proxy import apache_proxy  # noqa: F401  (fixture)
from support.grpc5_helpers import endpoint, grpc_cluster
from support.sdk5_polyglot import go_driver, make_topics, node_driver, run_driver

INVISIBLE_S = 10  # Apache's minimum invisible time for a receive (minInvisibleTimeMillsForRecv)
DELAY_MS = 2000
FIFO_GROUPS, FIFO_EACH = 2, 4
SDKS = {"go": go_driver, "node": node_driver}


def _names(sdk: str) -> dict[str, Any]:
    return {
        "topic": f"Poly{sdk}Normal",
        "fifo_topic": f"Poly{sdk}Fifo",
        "delay_topic": f"Poly{sdk}Delay",
        "push_topic": f"Poly{sdk}Push",
        "group": f"poly_{sdk}_simple",
        "fifo_group": f"poly_{sdk}_fifo",
        "delay_group": f"poly_{sdk}_delay",
        "push_group": f"poly_{sdk}_push",
        "invisible_s": INVISIBLE_S,
        "delay_ms": DELAY_MS,
        "fifo_groups": FIFO_GROUPS,
        "fifo_each": FIFO_EACH,
    }


def _prepare(namesrv: str, broker_addr: str) -> None:
    topics: dict[str, str] = {}
    for sdk in SDKS:
        n = _names(sdk)
        topics.update(
            {n["topic"]: "NORMAL", n["fifo_topic"]: "FIFO", n["delay_topic"]: "DELAY", n["push_topic"]: "NORMAL"}
        )
    make_topics(namesrv, broker_addr, topics, [_names(sdk)["fifo_group"] for sdk in SDKS])


@pytest.fixture(scope="module")
def rmq_core_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with grpc_cluster(tmp_path_factory.mktemp("rmq-core"), grpc_tls_self_signed=True) as c:
        _prepare(c.namesrv_addr, c.brokers[0].address)
        yield endpoint(c)


@pytest.fixture(scope="module")
def apache_endpoint(apache_proxy: Any) -> str:  # noqa: F811
    _prepare(apache_proxy.namesrv_addr, apache_proxy.broker_addr)
    return str(apache_proxy.grpc_endpoint)


@dataclass(frozen=True)
class Slack:
    """How late (ms) each timed event may come: rmq_core is held to tighter bounds than the control."""

    changed: int  # back after ChangeInvisibleDuration(1 s)
    unacked: int  # back after the invisible time is due
    delay: int  # a delay message after its delivery timestamp


RMQ_CORE = Slack(changed=4000, unacked=3000, delay=1000)
# Apache 5.3.3 seen here: changed 5.0-6.5 s, unacked 4.7-5.5 s and delay 0.4-1.0 s late
APACHE = Slack(changed=(INVISIBLE_S - 1) * 1000, unacked=9000, delay=2500)


def _check(sdk: str, r: dict[str, Any], slack: Slack) -> None:
    normal = r["normal_sent"]
    assert len(normal) == 3 and len(set(normal)) == 3, r
    # the first receive: each message once, with the producer's id, tag and keys, attempt 1
    first = r["first"] or []
    assert len(first) == 3, f"first receive: {first}, errors: {r.get('receive_errors')}"
    assert sorted(m["id"] for m in first) == sorted(normal), r
    for m in first:
        assert m["attempt"] == 1 and m["tag"] == "tagA", m
        assert m["keys"] == [f"key-{m['body'].split('-')[1]}"], m
    # change invisible duration to 1 s: that one back first, attempt 2
    (back,) = r["changed_back"] or [None]
    assert back is not None and back["id"] == r["changed"] and back["attempt"] == 2, r
    changed_after = back["at_ms"] - r["changed_at_ms"]
    assert changed_after < slack.changed, f"changed invisible duration to 1 s, back after {changed_after} ms"
    # no ack: back after the invisible time, attempt 2; the acked one never again
    (again,) = r["redelivered"] or [None]
    assert again is not None and again["id"] == r["unacked"] and again["attempt"] == 2, r
    first_at = next(m["at_ms"] for m in first if m["id"] == r["unacked"])
    due = first_at + INVISIBLE_S * 1000
    assert due - 500 <= again["at_ms"] <= max(due, r["redelivery_phase_ms"]) + slack.unacked, (again, due, r)
    assert not r["after"], f"redelivered again: {r['after']}"
    # FIFO: every message once, each message group in send order
    fifo = r["fifo_received"]
    assert sorted(m["id"] for m in fifo) == sorted(r["fifo_sent"]), r
    for g in range(FIFO_GROUPS):
        bodies = [m["body"] for m in fifo if m["group"] == f"g{g}"]
        assert bodies == [f"g{g}-{i}" for i in range(FIFO_EACH)], (g, bodies)
    # delay: not before it is due, and soon after
    (delayed,) = r["delay_received"]
    assert delayed["id"] == r["delay_sent"], r
    late = delayed["at_ms"] - r["delay_due_ms"]
    print(
        f"timings: changed back after {changed_after} ms, unacked back {again['at_ms'] - due} ms after due, "
        f"delay arrived {late} ms after due, driver total {r['total_ms']} ms"
    )
    assert -300 <= late <= slack.delay, f"delay message arrived {late} ms after its due time"
    if sdk == "node":  # the Go SDK has no PushConsumer
        assert sorted(r["push_received"]) == sorted(r["push_sent"]), r


@pytest.mark.parametrize("sdk", sorted(SDKS))
def test_sdk_against_rmq_core(sdk: str, rmq_core_endpoint: str, tmp_path: Path) -> None:
    r = run_driver(SDKS[sdk](), rmq_core_endpoint, _names(sdk), tmp_path)
    _check(sdk, r, RMQ_CORE)


@pytest.mark.apache_broker
@pytest.mark.parametrize("sdk", sorted(SDKS))
def test_sdk_against_apache_proxy(sdk: str, apache_endpoint: str, tmp_path: Path) -> None:
    r = run_driver(SDKS[sdk](), apache_endpoint, _names(sdk), tmp_path)
    _check(sdk, r, APACHE)
