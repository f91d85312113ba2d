"""The shape of a broker-against-broker benchmark's report, shared by benches/bench_vs_apache.py and
benches/bench_grpc.py: the workloads (key, label, unit), the runs each broker gave per workload in the order they
ran, rounds that alternate which broker goes first, the median and the ratio rmq_core / Apache of the medians, and
the two closing sections: every run, and the per-round ratios (runs of the same round ran back to back, so the slow
drift of a shared machine's load cancels). Each bench keeps its own Run (what one run measured), its summary's extra
columns and its main table. Plain data and print(); no state.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")
OURS, THEIRS = "rmq_core", "apache"


@dataclass
class Workload:
    key: str
    label: str
    unit: str
    higher_is_better: bool


@dataclass
class Results(Generic[R]):
    """Per workload key, per broker, its runs in the order they ran; the errors of every session."""

    runs: dict[str, dict[str, list[R]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, key: str, broker: str, run: R) -> None:
        self.runs.setdefault(key, {}).setdefault(broker, []).append(run)


def rounds_order(rounds: int, brokers: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(round, broker) in the order to run them: even rounds in ``brokers``' order, odd rounds reversed."""
    for rnd in range(rounds):
        order = brokers if rnd % 2 == 0 else tuple(reversed(brokers))
        for kind in order:
            yield rnd, kind


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None where either is missing (or b is 0)."""
    return a / b if a is not None and b else None


def broker_cell(runs: Sequence[Any]) -> dict[str, Any]:
    """The columns every bench gives a broker's runs of one workload (each run has ``value`` and ``failed``): the
    median of the values that are numbers (a NaN is a run that measured nothing), every value, the failures."""
    return {
        "median": median([r.value for r in runs if r.value == r.value]),
        "runs": [r.value for r in runs],
        "failed": sum(r.failed for r in runs),
    }


def cell(row: dict[str, Any], broker: str, key: str) -> Any:
    return row.get(broker, {}).get(key)


def print_every_run(
    summ: dict[str, Any],
    workloads: Sequence[Workload],
    brokers: tuple[str, ...],
    fmt: Callable[[float | None, str], str],
    extra: Callable[[dict[str, Any], str], str] = lambda row, broker: "",
) -> None:
    """Every run, in order, per workload: ``fmt(value, unit)`` each, then ``extra(row, broker)``, then failures."""
    print(f"every run, in order ({' | '.join(brokers)}):")
    for w in workloads:
        row = summ[w.key]
        parts = []
        for b in brokers:
            s = ", ".join(fmt(v, w.unit) for v in cell(row, b, "runs") or []) + extra(row, b)
            if cell(row, b, "failed"):
                s += f" ({cell(row, b, 'failed')} FAILED)"
            parts.append(s or "-")
        print(f"  {w.label:<38} {' | '.join(parts)}")


def print_round_ratios(
    summ: dict[str, Any], workloads: Sequence[Workload], brokers: tuple[str, ...], intro: Sequence[str]
) -> None:
    """Where both rmq_core and Apache ran: per workload the ratio of each round's runs and their median (only where
    every round has both runs, all numbers, Apache's nonzero). ``intro``: the section's heading lines."""
    if OURS not in brokers or THEIRS not in brokers:
        return
    print()
    for line in intro:
        print(line)
    for w in workloads:
        ours, theirs = (cell(summ[w.key], b, "runs") or [] for b in (OURS, THEIRS))
        if ours and len(ours) == len(theirs) and all(theirs) and all(v == v for v in ours + theirs):
            ratios = [x / y for x, y in zip(ours, theirs)]
            print(f"  {w.label:<38} {', '.join(f'{r:.2f}' for r in ratios)}  median {statistics.median(ratios):.2f}")
