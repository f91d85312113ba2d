"""The broker crash soak (benches/soak_broker.py), short version: `rmq-core broker` in its own process SIGKILLed
under sync, async and batch sends with a push consumer (its own process) attached, restarted on the same store, the
name server and the consumer killed too; nothing acknowledged is lost, nothing corrupt is served, no committed offset
passes an unconsumed message, the configs survive. The long version (100 kill cycles) is `benches/soak_broker.py`.

The verdict logic is checked on its own first, so that the soak's zeros mean something."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from soak_broker import Ledger, SoakReport, evaluate, run_soak


def test_evaluate_counts_lost_corrupt_passed_and_duplicates():
    ledger = Ledger()
    ledger.ack("k-1", 0, 0)
    ledger.ack("k-2", 0, 1)
    ledger.ack("k-3", 1, 0)  # acknowledged, stored, never delivered: lost
    ledger.ack("k-4", 1, 5)  # acknowledged at an offset that holds another key: lost
    ledger.delivered(["k-1", "k-2", "k-1"], bad=["k-2"])
    stored = {(0, 0): "k-1", (0, 1): "k-2", (1, 0): "k-3", (1, 5): "k-9", (1, 6): "k-1"}
    rep = SoakReport("ASYNC_FLUSH")
    evaluate(ledger, stored, [(0.0, {1: 1})], rep)  # queue 1 committed past k-3, never consumed
    assert (rep.acked, rep.lost, rep.corrupt_served, rep.offset_passed) == (4, 2, 1, 1)
    assert (rep.duplicates, rep.stored_twice) == (1, 1)
    assert not rep.ok

    clean = SoakReport("ASYNC_FLUSH")
    evaluate(ledger, {(0, 0): "k-1", (0, 1): "k-2"}, [(1e12, {0: 2})], clean)
    assert clean.offset_passed == 0


@pytest.mark.slow
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_broker_kill_9_soak_short(flush):
    rep = run_soak(flush, cycles=3, seed=7, run_s=(0.3, 0.8), kill_namesrv_every=2, kill_consumer_every=2)
    assert rep.cycles == 3 and rep.namesrv_kills == 1 and rep.consumer_kills == 1
    assert rep.acked > 100, rep
    assert (rep.lost, rep.corrupt_served, rep.offset_passed, rep.config_failures) == (0, 0, 0, 0), rep.problems
    assert rep.ok, rep.problems
