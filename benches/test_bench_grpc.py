"""benches/bench_grpc.py: the pieces that decide its figures (load split, merged percentiles, medians, ratios) and a
tiny run against rmq_core's broker (real SDK client processes; about 20 s), so a change that breaks the bench or the
SDK clients' path through the broker shows up without a full run.

Run: .venv/bin/python -m pytest benches/test_bench_grpc.py
"""

from __future__ import annotations

import os

import pytest
from bench_grpc import SDK_PYTHON, ClientRun, Results, Run, main, parse_args, split, summary


def test_load_is_split_over_the_client_processes_without_loss() -> None:
    assert split(10, 3) == [4, 3, 3]
    assert sum(split(6001, 4)) == 6001


def test_merged_client_runs_give_rate_and_percentiles() -> None:
    run = ClientRun(count=300, first=100.0, last=101.5, latencies_us=list(range(1000, 101_000, 1000)))
    assert run.rate == pytest.approx(200)
    p50, p99 = run.p50_p99_ms()
    assert p50 == pytest.approx(50.5) and 99 <= p99 <= 100
    assert ClientRun(latencies_us=[5]).p50_p99_ms()[0] != ClientRun(latencies_us=[5]).p50_p99_ms()[0]  # nan: 1 value


def test_summary_medians_and_ratio_of_medians() -> None:
    r = Results()
    for v in (3000, 1000, 2000):
        r.add("send", "rmq_core", Run(v, broker_cores=0.9, client_cores=0.8, broker_cpu_per_10k=2.0))
    for v in (1000, 1500):
        r.add("send", "apache", Run(v, failed=1))
    row = summary(r, ("rmq_core", "apache"))["send"]
    assert row["rmq_core"]["median"] == 2000 and row["rmq_core"]["runs"] == [3000, 1000, 2000]
    assert row["apache"]["median"] == 1250 and row["apache"]["failed"] == 2
    assert row["ratio"] == pytest.approx(1.6)
    assert row["rmq_core"]["broker_cpu_per_10k_median"] == 2.0
    assert summary(r, ("rmq_core",))["push"]["ratio"] is None


def test_tiny_mode_and_broker_choice() -> None:
    a = parse_args(["--tiny", "--brokers", "rmq_core"])
    assert a.brokers == ("rmq_core",) and a.messages <= 100 and a.redeliver == 0
    with pytest.raises(SystemExit):
        parse_args(["--brokers", "kafka"])


@pytest.mark.skipif(not os.path.exists(SDK_PYTHON), reason=f"RocketMQ's 5.x Python SDK venv not found ({SDK_PYTHON})")
def test_a_tiny_run_against_rmq_core(tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = os.path.join(tmp_path, "grpc.json")
    assert main(["--tiny", "--brokers", "rmq_core", "--json", out]) == 0, capsys.readouterr().out[-3000:]
    import json

    with open(out) as f:
        summ = json.load(f)["summary"]
    for key in ("send", "simple", "push", "sat_consume"):
        assert summ[key]["rmq_core"]["median"] > 0 and summ[key]["rmq_core"]["failed"] == 0, key
    assert summ["processes"]["rmq_core"]["median"] == 1
    assert summ["e2e_rate_p99"]["rmq_core"]["median"] > 0
