"""How long ``MessageStore`` takes to open after its writer was killed with SIGKILL mid-write, index on vs off.

    .venv/bin/python benches/bench_restart_after_kill.py [--messages 2000000] [--rounds 3] [--abort-of-another-boot]

Each round: a fresh store directory; a child process puts ``--messages`` 256 B messages with a KEYS value (4 queues,
256 MiB CommitLog files, 4.9's default index geometry), then keeps putting; it is SIGKILLed; the store is opened in
a fresh process and the open is timed (recovery, index load, re-index of what the index lacks). Rounds alternate
index on / off. Printed: the medians, every run, the records re-indexed and the index files dropped.

``--abort-of-another-boot`` blanks the abort file before the open, as a machine crash (or Apache, which writes it
empty) leaves it: 4.9's rule applies then (the index file newer than the checkpoint is deleted and rebuilt), the
cost this bench was made to show; without it the open sees a process crash within this boot (the files kept).
The machine is shared: read the on/off ratio, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

WRITER = """
import sys
from rmq_core.store import MessageStore, StoreConfig
from rmq_core.message import Message
s = MessageStore(sys.argv[1], StoreConfig(mapped_file_size_commit_log=256 << 20, message_index_enable=sys.argv[3] == "1"))
batch = [(Message("T", b"x" * 256, keys=f"k{i}"), i % 4) for i in range(1000)]
for _ in range(int(sys.argv[2]) // 1000):
    s.put_messages(batch)
print("ready", flush=True)
while True:
    s.put_messages(batch)
"""

OPEN = """
import sys, time, json
from rmq_core.store import MessageStore, StoreConfig
t = time.perf_counter()
s = MessageStore(sys.argv[1], StoreConfig(mapped_file_size_commit_log=256 << 20, message_index_enable=sys.argv[2] == "1"))
dt = time.perf_counter() - t
r = s.recovery_report
print(json.dumps({"open_s": dt, "rebuilt": r["index_rebuilt"], "dropped": r["index_files_dropped"]}))
s.close()
"""


def one_round(root: str, messages: int, index: bool, another_boot: bool) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    flag = "1" if index else "0"
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, root, str(messages), flag], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait()
    if another_boot:
        with open(os.path.join(root, "abort"), "wb"):
            pass
    out = subprocess.check_output([sys.executable, "-c", OPEN, root, flag], text=True)
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--abort-of-another-boot", action="store_true")
    a = ap.parse_args()
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="rmq-bench-restart-") as tmp:
        root = os.path.join(tmp, "store")
        for rnd in range(a.rounds):
            for index in (True, False):
                r = one_round(root, a.messages, index, a.abort_of_another_boot)
                runs[index].append(r)
                print(f"round {rnd} index={'on ' if index else 'off'} {r}", flush=True)
    med = {k: statistics.median(r["open_s"] for r in v) for k, v in runs.items()}
    print(
        f"\nopen after kill -9, {a.messages:,} messages ({'another boot' if a.abort_of_another_boot else 'same boot'}):"
    )
    for k in (True, False):
        every = ", ".join(f"{r['open_s']:.3f}" for r in runs[k])
        print(f"  index {'on ' if k else 'off'}: median {med[k]:.3f} s   runs {every}")
    print(f"  on / off: {med[True] / med[False]:.2f}")


if __name__ == "__main__":
    main()
