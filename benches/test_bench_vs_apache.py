"""The pieces of benches/bench_vs_apache.py and benches/lean_clients.py that decide its figures, checked without
starting a broker (the benchmark itself is run by ``./dev bench``): frame splitting across reads, the round order,
medians and ratios.

Run: .venv/bin/python -m pytest benches/test_bench_vs_apache.py
"""

from __future__ import annotations

import struct

import pytest
from bench_vs_apache import NO_STORE, Results, Run, parse_args, rounds_order, summary
from lean_clients import _Frames

from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand


def test_frames_split_across_reads_and_other_serializations() -> None:
    ok = RemotingCommand.response_to(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2), 0).encode()
    binary_header = b"\x00" * 10
    other = struct.pack(">ii", 4 + len(binary_header) + 3, (1 << 24) | len(binary_header)) + binary_header + b"abc"
    stream = ok + other + ok
    frames = _Frames()
    got = []
    for i in range(0, len(stream), 7):  # reads that cut frames anywhere
        got += frames.feed(stream[i : i + 7])
    assert [h is not None and h.startswith(b'{"code":0,') for h, _ in got] == [True, False, True]
    assert [n for _, n in got] == [0, 3, 0]
    assert not frames.buf


def test_rounds_alternate_which_broker_goes_first() -> None:
    assert list(rounds_order(3, ("rmq_core", "apache"))) == [
        (0, "rmq_core"),
        (0, "apache"),
        (1, "apache"),
        (1, "rmq_core"),
        (2, "rmq_core"),
        (2, "apache"),
    ]


def test_summary_medians_ratios_and_cpu_per_10k() -> None:
    r = Results()
    for v, cpu in ((30_000, 3.0), (10_000, 1.0), (20_000, 2.0)):
        r.add("send", "rmq_core", Run(v, messages=100_000, cpu_s=cpu, hwm_mib=v / 1000))
    for v in (40_000, 50_000):
        r.add("send", "apache", Run(v, messages=100_000, cpu_s=4.0, failed=1))
    s = summary(r, ("rmq_core", "apache"))["send"]
    assert s["rmq_core"]["median"] == 20_000
    assert s["rmq_core"]["runs"] == [30_000, 10_000, 20_000]  # in the order they ran
    assert s["rmq_core"]["cpu_s_per_10k_median"] == pytest.approx(0.2)
    assert s["rmq_core"]["peak_rss_mib_max"] == 30
    assert s["apache"]["median"] == 45_000 and s["apache"]["failed"] == 2
    assert s["ratio"] == pytest.approx(20_000 / 45_000)
    assert s["cpu_ratio"] == pytest.approx(0.5)
    assert summary(r, ("rmq_core", "apache"))["pull"]["ratio"] is None


def test_the_ceiling_broker_is_a_third_kind_with_its_own_ratio() -> None:
    args = parse_args(["--ceiling", "--rounds", "2"])
    assert args.brokers == ("rmq_core", "apache", NO_STORE)
    assert [k for _, k in rounds_order(2, args.brokers)] == [
        "rmq_core",
        "apache",
        NO_STORE,
        NO_STORE,
        "apache",
        "rmq_core",
    ]
    r = Results()
    r.add("java_sync", "rmq_core", Run(18_000))
    r.add("java_sync", "apache", Run(15_000))
    r.add("java_sync", NO_STORE, Run(21_000))
    s = summary(r, args.brokers)["java_sync"]
    assert s["ratio"] == pytest.approx(1.2) and s["no_store_ratio"] == pytest.approx(1.4)
    assert summary(r, ("rmq_core", "apache"))["java_sync"]["no_store_ratio"] is None
