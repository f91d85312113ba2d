"""The ``rmq-core`` command line. This stage: ``rmq-core store demo|inspect|verify``.

``store demo`` is the main job on embedded defaults: it writes a stream of tagged messages into a local store
directory, reads every queue back with a tag filter through get_message (the pull path), checks what came back
against what was written, and prints what it did and how fast.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections import Counter

from rmq_core import backend
from rmq_core.filter import build_subscription_data
from rmq_core.message import Message, tags_hash
from rmq_core.store import GetMessageStatus, MessageStore, StoreConfig


def _progress(label: str, done: int, total: int, started: float) -> None:
    if not sys.stderr.isatty() and done != total:
        return
    rate = done / max(time.perf_counter() - started, 1e-9)
    end = "\n" if done == total else "\r"
    print(f"  {label}: {done:,}/{total:,} ({100 * done // max(total, 1)}%, {rate:,.0f}/s)", end=end, file=sys.stderr)


def cmd_store_demo(args: argparse.Namespace) -> int:
    root = args.dir
    if args.fresh and os.path.isdir(root):
        shutil.rmtree(root)
    tags = [t.strip() for t in args.tags.split(",") if t.strip()]
    topic, total, queues = args.topic, args.messages, args.queues
    body = (b"rmq_core demo payload " * (args.size // 22 + 1))[: args.size]
    print(f"rmq-core store demo: backend={backend()} dir={root} topic={topic} queues={queues} "
          f"messages={total:,} body={args.size} B tags={tags}")
    expected: Counter[tuple[int, str]] = Counter()
    with MessageStore(root, StoreConfig()) as store:
        base = {q: store.get_max_offset_in_queue(topic, q) for q in range(queues)}
        started = time.perf_counter()
        written = 0
        append_s = 0.0
        while written < total:
            n = min(args.batch, total - written)
            batch = []
            for i in range(written, written + n):
                q = i % queues
                tag = tags[(i // queues) % len(tags)]  # every queue gets every tag, interleaved
                batch.append((Message(topic, body, tags=tag, keys=f"k{i}", properties={"seq": str(i)}), q))
                expected[(q, tag)] += 1
            t0 = time.perf_counter()
            results = store.put_messages(batch)
            append_s += time.perf_counter() - t0
            if not results.all_ok:
                print(f"error: put failed: {set(results.statuses)}", file=sys.stderr)
                return 1
            written += n
            _progress("write", written, total, started)
        store.flush()
        write_s = time.perf_counter() - started

        want = args.read_tag or tags[0]
        sub = build_subscription_data(topic, want)
        started = time.perf_counter()
        got: Counter[tuple[int, str | None]] = Counter()
        records = 0
        for q in range(queues):
            offset = base[q]
            while True:
                r = store.get_message("demo-group", topic, q, offset, 32, want)
                if r.status == GetMessageStatus.FOUND:
                    for m in r.decode():
                        if m.tags not in sub.tags_set:
                            print(f"error: filter let through tag {m.tags!r} at {q}:{m.queue_offset}", file=sys.stderr)
                            return 1
                        got[(q, m.tags)] += 1
                        records += 1
                elif r.status != GetMessageStatus.NO_MATCHED_MESSAGE:
                    break
                offset = r.next_begin_offset
        read_s = time.perf_counter() - started
        max_phy = store.max_physical_offset

    mismatched = [q for q in range(queues) if got[(q, want)] != expected[(q, want)]]
    print(f"  wrote {total:,} messages ({max_phy:,} bytes of CommitLog) in {write_s:.2f} s "
          f"= {total / write_s:,.0f} msg/s end to end; the store's put_messages alone: {append_s:.2f} s "
          f"= {total / max(append_s, 1e-9):,.0f} msg/s (the rest is building Message objects in Python)")
    print(f"  read back tag {want!r} (hash {tags_hash(want)}): {records:,} messages from {queues} queues in "
          f"{read_s:.2f} s = {records / max(read_s, 1e-9):,.0f} msg/s")
    for q in range(queues):
        print(f"    queue {q}: {got[(q, want)]:,} {want} (expected {expected[(q, want)]:,})")
    if mismatched:
        print(f"error: queues {mismatched} did not return what was written", file=sys.stderr)
        return 1
    print("  ok: every message written with that tag was read back, and nothing else")
    return 0


def cmd_store_inspect(args: argparse.Namespace) -> int:
    with MessageStore(args.dir, StoreConfig()) as store:
        print(f"store {args.dir} (backend={backend()})")
        print(f"  commitlog: physical offsets [{store.min_physical_offset:,}, {store.max_physical_offset:,})")
        files = sorted(os.listdir(os.path.join(args.dir, "commitlog"))) if os.path.isdir(
            os.path.join(args.dir, "commitlog")) else []
        print(f"  commitlog files: {len(files)}" + (f" ({files[0]} .. {files[-1]})" if files else ""))
        for topic, q in store.topics():
            print(f"  consumequeue {topic}/{q}: offsets [{store.get_min_offset_in_queue(topic, q):,}, "
                  f"{store.get_max_offset_in_queue(topic, q):,})")
        report = store.recovery_report
        print(f"  last open: {'abnormal (recovered)' if report.get('abnormal') else 'normal'} {report}")
    return 0


def cmd_store_verify(args: argparse.Namespace) -> int:
    """Open (recovering), then read every queue end to end through get_message and decode every record."""
    problems = 0
    with MessageStore(args.dir, StoreConfig()) as store:
        total = 0
        for topic, q in store.topics():
            offset = store.get_min_offset_in_queue(topic, q)
            end = store.get_max_offset_in_queue(topic, q)
            while offset < end:
                r = store.get_message("verify", topic, q, offset, 32)
                if r.status == GetMessageStatus.FOUND:
                    msgs = r.decode()
                    for m in msgs:
                        if m.topic != topic or m.queue_id != q:
                            print(f"  mismatch at {topic}/{q}@{m.queue_offset}: record says {m.topic}/{m.queue_id}")
                            problems += 1
                    total += len(msgs)
                elif r.next_begin_offset <= offset:
                    print(f"  {topic}/{q}: stopped at {offset} with {r.status.name}")
                    problems += 1
                    break
                offset = r.next_begin_offset
        print(f"verified {total:,} messages in {len(store.topics())} queues; recovery: {store.recovery_report}")
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq-core", description="A RocketMQ core for Python (Rust hot path).")
    sub = p.add_subparsers(dest="command", required=True)
    store = sub.add_parser("store", help="work with a local store directory", description="Local store commands.")
    ssub = store.add_subparsers(dest="store_command", required=True)

    demo = ssub.add_parser("demo", help="write messages, read them back by queue with a tag filter, report speed")
    demo.add_argument("--dir", default="./rmq-store", help="store directory (default ./rmq-store)")
    demo.add_argument("--topic", default="DemoTopic")
    demo.add_argument("--messages", type=int, default=200_000)
    demo.add_argument("--queues", type=int, default=4)
    demo.add_argument("--size", type=int, default=128, help="body size in bytes")
    demo.add_argument("--batch", type=int, default=1000, help="messages per put_messages call")
    demo.add_argument("--tags", default="TagA,TagB,TagC,TagD")
    demo.add_argument("--read-tag", default=None, help="tag to read back (default: the first)")
    demo.add_argument("--fresh", action="store_true", help="delete the directory first")
    demo.set_defaults(func=cmd_store_demo)

    inspect = ssub.add_parser("inspect", help="show files, offsets and the last recovery")
    inspect.add_argument("dir")
    inspect.set_defaults(func=cmd_store_inspect)

    verify = ssub.add_parser("verify", help="recover if needed, then read and decode every message")
    verify.add_argument("dir")
    verify.set_defaults(func=cmd_store_verify)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
