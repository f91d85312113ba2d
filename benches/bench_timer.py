"""Timer messages (RocketMQ 5's TIMER_DELIVER_MS, broker/timer/): delivery lateness under a steady load, the cost per
timer, and the memory of a million pending timers.

    .venv/bin/python benches/bench_timer.py steady [--rate 10000] [--seconds 20] [--delay-ms 2000-4000] [--rounds 3]
    .venv/bin/python benches/bench_timer.py steady-net [--rate 10000] [--seconds 20] [--delay-ms 2000-4000] [--rounds 3]
    .venv/bin/python benches/bench_timer.py pending [--count 1000000]

steady   an in-process broker (ASYNC_FLUSH, 1 s precision, the defaults); a feeder thread hands the broker's loop a
         batch of timer messages every 10 ms (``--rate`` per second in all) that go through the send processor's
         own rule (``transform_timer_message``) and ``put_messages`` to ``rmq_sys_wheel_timer``, as a send does after
         its checks, each due ``--delay-ms`` (uniform) after it was made. The broker enqueues them (timer log +
         wheel) and delivers them to their topic; lateness = the delivered record's store timestamp − its
         ``TIMER_DELIVER_MS``. Prints p50 / p99 / max lateness (target: within 100 ms at 10 000 timers/s), the count
         early (must be 0), the broker thread's CPU per timer, per round and the medians.
         The remoting path is not in the loop (the clients cannot offer 10 000 sends/s on the 2 shared cores beside
         the broker); the broker's send processor cost per message is measured by benches/bench_broker.py.
steady-net  the same load through the wire: ``rmq-core broker`` in its own process; this process writes pre-built
         SEND_MESSAGE_V2 frames (benches/lean_clients.py) with ``TIMER_DELAY_MS`` (uniform in ``--delay-ms``) and a
         UNIQ_KEY, ``--rate`` per second in bursts every 10 ms on one connection, counting the answers. The broker is
         then stopped (SIGTERM) and the store read: lateness = the delivered record's store timestamp − (its timer
         record's store timestamp + its delay); the broker process's CPU (utime + stime) per timer. The reference
         is a few ms later than the true due time (the broker adds the delay to its clock when the send is checked,
         before the batch of sends is stored), so "early" here counts that gap (``early_max_ms`` says how big), not
         an early delivery; ``steady`` uses absolute deliver times and counts true early deliveries.
pending  ``--count`` timers due in an hour, put the same way, then waits until all are filed in the wheel: the
         process RSS (total, anonymous, file-backed) before and after, the timer heap's size, the time to file them;
         then a clean restart: the seconds until the broker serves again and the timers the wheel still counts.
The machine is shared: figures are from one run; read them with that in mind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.timer.timer_message_hook import transform_timer_message
from rmq_core.message import Message, decode_messages

TOPIC = "BenchTimerTopic"


def _now() -> int:
    return time.time_ns() // 1_000_000


def _rss() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0]) // 1024
    return out  # MiB


def _config(root: str, **kw: Any) -> BrokerConfig:
    return BrokerConfig(
        listen_port=0,
        store_path_root_dir=root,
        mapped_file_size_commit_log=kw.pop("commit_log", 256 << 20),
        mapped_file_size_consume_queue=300_000 * 20,
        **kw,
    )


def _put_timers(b: Broker, n: int, due_of: Any, queue_ids: int = 4) -> None:
    """On the broker's loop: n timer messages through the send processor's rule, put in one call."""
    c = b.controller
    cfg = c.broker_config
    store = c.message_store
    now = _now()
    batch = []
    for i in range(n):
        m = Message(TOPIC, b"x" * 100, tags="T")
        m.properties["TIMER_DELIVER_MS"] = str(due_of(now, i))
        q = transform_timer_message(
            m,
            i % queue_ids,
            0,
            timer_wheel_enable=True,
            timer_max_delay_sec=cfg.timer_max_delay_sec,
            timer_precision_ms=cfg.timer_precision_ms,
            now_ms=now,
        )
        batch.append((m, q))
    r = store.put_messages(batch, ("127.0.0.1", 1), wait_flush=False)
    assert r.all_ok, r.statuses


def _call(b: Broker, fn: Any) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), b.controller.loop).result(60)


def _thread_cpu(b: Broker) -> float:
    return float(_call(b, time.thread_time))


def steady_round(rate: int, seconds: float, delay: tuple[int, int], seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="bench-timer-") as root, Broker(_config(root)) as b:
        per_tick = max(1, rate // 100)
        loop = b.controller.loop
        cpu0 = _thread_cpu(b)
        t0 = time.monotonic()
        sent = 0
        tick = 0

        def due(now: int, i: int) -> int:
            return now + rnd.randint(*delay)

        while time.monotonic() - t0 < seconds:
            loop.call_soon_threadsafe(_put_timers, b, per_tick, due)
            sent += per_tick
            tick += 1
            sleep = t0 + tick * 0.01 - time.monotonic()
            if sleep > 0:
                time.sleep(sleep)
        feed_s = time.monotonic() - t0
        deadline = time.monotonic() + delay[1] / 1000 + 10
        store = b.message_store
        while time.monotonic() < deadline:
            total = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(4))
            if total >= sent:
                break
            time.sleep(0.2)
        cpu = _thread_cpu(b) - cpu0
        late: list[int] = []
        for q in range(4):
            off = 0
            mx = store.get_max_offset_in_queue(TOPIC, q)
            while off < mx:
                r = store.get_message("bench", TOPIC, q, off, 10_000)
                for m in decode_messages(r.body):
                    late.append(m.store_timestamp - int(m.properties["TIMER_DELIVER_MS"]))
                off = r.next_begin_offset
        late.sort()
        n = len(late)
        return {
            "rate_offered": round(sent / feed_s),
            "sent": sent,
            "delivered": n,
            "early": sum(1 for x in late if x < 0),
            "p50_ms": late[n // 2] if n else None,
            "p99_ms": late[min(n - 1, int(n * 0.99))] if n else None,
            "max_ms": late[-1] if n else None,
            "within_100ms": round(sum(1 for x in late if x <= 100) / n, 5) if n else None,
            "broker_cpu_us_per_timer": round(cpu / max(sent, 1) * 1e6, 1),
        }


def pending(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-timer-") as root, Broker(_config(root, commit_log=1 << 30)) as b:
        before = _rss()
        t0 = time.monotonic()
        chunk = 10_000
        hour = 3600_000
        for k in range(0, count, chunk):
            n = min(chunk, count - k)
            _call(b, lambda n=n, k=k: _put_timers(b, n, lambda now, i: now + hour + ((k + i) * 7919) % 600_000))
        put_s = time.monotonic() - t0
        ts = b.controller.timer_message_store
        assert ts is not None
        while _call(b, lambda: ts.enqueued) < count:
            time.sleep(0.5)
        filed_s = time.monotonic() - t0
        after = _rss()
        heap = _call(b, lambda: ts.pending_in_heap)
        log_bytes = ts.timer_log.write_pos
        b.shutdown()
        t1 = time.monotonic()
        with Broker(_config(root, commit_log=1 << 30)) as b2:
            restart_s = time.monotonic() - t1
            ts2 = b2.controller.timer_message_store
            assert ts2 is not None
            pending_after = _call(b2, lambda: ts2.timer_wheel.get_all_num(_now()))
        return {
            "restart_s": round(restart_s, 2),
            "pending_in_wheel_after_restart": pending_after,
            "count": count,
            "put_s": round(put_s, 1),
            "filed_s": round(filed_s, 1),
            "rss_before_mib": before,
            "rss_after_mib": after,
            "timer_heap_entries": heap,
            "timer_log_bytes": log_bytes,
        }


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def steady_net_round(rate: int, seconds: float, delay: tuple[int, int], seed: int) -> dict[str, Any]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_broker import start_broker
    from lean_clients import _Frames, send_request

    from rmq_core.store import MessageStore, StoreConfig

    rnd = random.Random(seed)
    total = int(rate * seconds)
    frames = []
    delays: dict[str, int] = {}
    for i in range(total):
        d = rnd.randint(*delay)
        key = f"BENCHTIMER{seed:04d}{i:012d}"
        delays[key] = d
        props = {"TAGS": "T", "TIMER_DELAY_MS": str(d), "UNIQ_KEY": key}
        frames.append(send_request(TOPIC, i % 4, b"x" * 100, props).encode())
    with tempfile.TemporaryDirectory(prefix="bench-timer-net-") as root:
        conf = os.path.join(root, "broker.conf")
        with open(conf, "w") as f:
            f.write("mappedFileSizeCommitLog=268435456\n")
        proc, addr = start_broker(os.path.join(root, "store"), conf)
        try:
            host, port = addr.rsplit(":", 1)

            async def feed() -> tuple[int, int, float]:
                loop = asyncio.get_running_loop()
                answered = failed = 0
                parser = _Frames()
                done = loop.create_future()

                class P(asyncio.Protocol):
                    def data_received(self, data: bytes) -> None:
                        nonlocal answered, failed
                        for header, _ in parser.feed(data):
                            answered += 1
                            if header is None or not header.startswith(b'{"code":0,'):
                                failed += 1
                        if answered >= total and not done.done():
                            done.set_result(None)

                transport, _ = await loop.create_connection(P, host, int(port))
                per_tick = max(1, rate // 100)
                t0 = time.monotonic()
                for k in range(0, total, per_tick):
                    transport.write(b"".join(frames[k : k + per_tick]))
                    wait = t0 + (k // per_tick + 1) * 0.01 - time.monotonic()
                    await asyncio.sleep(max(wait, 0))
                feed_s = time.monotonic() - t0
                await asyncio.wait_for(done, 60)
                transport.close()
                return answered, failed, feed_s

            cpu0 = _proc_cpu_s(proc.pid)
            answered, failed, feed_s = asyncio.run(feed())
            time.sleep(delay[1] / 1000 + 2)
            cpu = _proc_cpu_s(proc.pid) - cpu0
        finally:
            proc.terminate()
            proc.wait(60)
        late: list[int] = []
        cfg = StoreConfig(mapped_file_size_commit_log=268435456)
        with MessageStore(os.path.join(root, "store"), cfg) as store:
            born: dict[str, int] = {}
            off, mx = 0, store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0)
            while off < mx:
                r = store.get_message("bench", "rmq_sys_wheel_timer", 0, off, 10_000)
                for m in decode_messages(r.body):
                    born[m.properties["UNIQ_KEY"]] = m.store_timestamp
                off = r.next_begin_offset
            for q in range(4):
                off, mx = 0, store.get_max_offset_in_queue(TOPIC, q)
                while off < mx:
                    r = store.get_message("bench", TOPIC, q, off, 10_000)
                    for m in decode_messages(r.body):
                        k = m.properties["UNIQ_KEY"]
                        late.append(m.store_timestamp - (born[k] + delays[k]))
                    off = r.next_begin_offset
    late.sort()
    n = len(late)
    return {
        "rate_offered": round(total / feed_s),
        "sent": total,
        "answered": answered,
        "failed": failed,
        "delivered": n,
        "early": sum(1 for x in late if x < 0),
        "early_max_ms": -late[0] if n and late[0] < 0 else 0,
        "p50_ms": late[n // 2] if n else None,
        "p99_ms": late[min(n - 1, int(n * 0.99))] if n else None,
        "max_ms": late[-1] if n else None,
        "within_100ms": round(sum(1 for x in late if x <= 100) / n, 5) if n else None,
        "broker_process_cpu_us_per_timer": round(cpu / max(total, 1) * 1e6, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("steady", "steady-net", "pending"))
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--delay-ms", default="2000-4000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=1_000_000)
    a = ap.parse_args()
    if a.mode in ("steady", "steady-net"):
        lo, hi = (int(x) for x in a.delay_ms.split("-"))
        runs = []
        fn = steady_round if a.mode == "steady" else steady_net_round
        for i in range(a.rounds):
            r = fn(a.rate, a.seconds, (lo, hi), seed=i)
            print(json.dumps(r), flush=True)
            runs.append(r)
        cpu_key = "broker_cpu_us_per_timer" if a.mode == "steady" else "broker_process_cpu_us_per_timer"
        med = {k: statistics.median(r[k] for r in runs) for k in ("p50_ms", "p99_ms", "max_ms", cpu_key)}
        print(json.dumps({"median": med, "early_total": sum(r["early"] for r in runs)}))
    else:
        print(json.dumps(pending(a.count)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
