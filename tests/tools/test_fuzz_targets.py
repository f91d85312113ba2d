"""The fuzz targets (fuzz/targets.py) in the suite: each runs over its seed corpus (real wire captures, store files,
configs: fuzz/make_corpus.py), over every input a fuzz campaign found and kept (fuzz/regressions/<target>/), and over
seeded random mutations of the seeds (bit flips, truncations, splices, inserted length fields), so a decoder that
starts to crash, panic, or disagree with its twin fails here before a campaign is run again (fuzz/run.py)."""

from __future__ import annotations

import os
import random
import struct
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
sys.path.insert(0, str(FUZZ))
import targets  # noqa: E402

MUTATIONS_PER_TARGET = 1500


def _inputs(name: str) -> list[bytes]:
    out = []
    for sub in ("corpus", "regressions"):
        d = FUZZ / sub / name
        if d.is_dir():
            out += [p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()]
    return out


def _mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = bytearray(rng.choice(seeds) if seeds else b"")
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and data:  # flip a bit
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:  # truncate
            del data[rng.randrange(len(data)) :]
        elif op == 2 and seeds:  # splice another seed in
            other = rng.choice(seeds)
            i = rng.randrange(len(data) + 1)
            data[i:i] = other[: rng.randrange(len(other) + 1)]
        elif op == 3:  # an extreme 4-byte length or size field
            i = rng.randrange(len(data) + 1)
            data[i : i + 4] = struct.pack(">i", rng.choice([0, -1, 1, 2**31 - 1, -(2**31), 91, 4096]))
        else:  # random bytes
            data += os.urandom(rng.randrange(1, 16))
    return bytes(data)


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_fuzz_target_over_seeds_regressions_and_mutations(name):
    target = targets.TARGETS[name]
    seeds = _inputs(name)
    assert seeds, f"no seed corpus for {name}: run fuzz/make_corpus.py"
    for data in seeds:
        target(data)
    rng = random.Random(f"fuzz-{name}")
    for _ in range(MUTATIONS_PER_TARGET):
        target(_mutate(rng, seeds))


def test_targets_flag_a_disagreement_between_the_backends(monkeypatch):
    """The comparison is real: a Python twin that drops the last message makes decode_messages fail."""
    seeds = _inputs("decode_messages")
    python = targets.PYTHON

    class Lossy:
        def __getattr__(self, attr):
            return getattr(python, attr)

        @staticmethod
        def decode_messages(buf):
            return python.decode_messages(buf)[:-1]

    monkeypatch.setattr(targets, "PYTHON", Lossy())
    with pytest.raises(AssertionError, match="disagree"):
        for data in seeds:
            targets.decode_messages(data)


def test_live_broker_survives_mutated_frames():
    """fuzz/live_broker.py at a small size: mutated frames pipelined to a live broker close only their own
    connection; the probe connection is answered throughout."""
    import live_broker

    result = live_broker.run(3000, seed=7)
    assert result["probes answered"] == 7 and result["connections closed by the broker"] > 0, result
    assert result["worst probe s"] < 2.0, result
