"""Run one fuzz target (fuzz/targets.py) under atheris (libFuzzer for Python), from its seed corpus.

    .venv/bin/python fuzz/run.py decode_messages -runs=1000000          # one target, a million inputs
    .venv/bin/python fuzz/run.py all -runs=1000000                      # every target in turn (one process each)
    .venv/bin/python fuzz/make_corpus.py                                # (re)build the seed corpora first

Extra arguments go to libFuzzer (``-max_total_time=60``, ``-max_len=4096`` ...); ``-timeout=1`` (a hang is an input
that takes over a second) is the default. A crash writes ``crash-<sha1>`` in the current directory and exits
non-zero; turn it into a regression test (tests/tools/test_fuzz_targets.py reads fuzz/regressions/<target>/).

Coverage: atheris instruments the Python code it imports (the decoders, the Python twins); the Rust extension is
exercised through its bindings without coverage feedback (no nightly toolchain for cargo-fuzz here), and every Rust
decoder's answer is compared with its Python twin's on the same input.
"""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    name, extra = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, HERE)
    import targets

    if name == "all":
        failed = 0
        for target in targets.TARGETS:
            print(f"== {target}", flush=True)
            failed |= subprocess.call([sys.executable, __file__, target, *extra])
        return failed
    import logging

    import atheris

    logging.disable(logging.CRITICAL)  # decoders log what they refuse; a million log lines would be the bottleneck

    atheris.instrument_all()  # every Python function loaded so far: rmq_core's decoders and twins
    target = targets.TARGETS[name]
    seeds = os.path.join(targets.CORPUS_DIR, name)
    work = os.path.join(HERE, ".work", name)  # libFuzzer adds what it finds to the first directory (not committed)
    os.makedirs(work, exist_ok=True)
    args = [sys.argv[0], *extra, work, seeds]
    if not any(a.startswith("-timeout=") for a in extra):
        args.insert(1, "-timeout=1")
    atheris.Setup(args, target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
