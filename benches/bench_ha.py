"""Replication figures, rmq_core against Apache RocketMQ 4.9.7 in the same run (issue 16):

    .venv/bin/python benches/bench_ha.py [--rounds 3] [--backlog 100000] [--sync-messages 20000] [--quick]

Each brand runs as its own processes (rmq_core: ``rmq-core namesrv`` + ``rmq-core broker -c`` for the master and the
slave; Apache: the NamesrvStartup / BrokerStartup JVMs of tests/support/apache_rocketmq.py), master and slave of the
same brand, from the same broker.conf settings (bench_vs_apache.BROKER_CONF: 256 MiB CommitLog files, ASYNC_FLUSH).
Rounds alternate which brand goes first. Two figures per round and brand:

  catch-up   the master holds a backlog of --backlog 1 KiB messages (sent by the lean sender, window 256); a slave is
             started with ``haMasterAddress`` pointing at a gate (a TCP relay in this process, closed); once the slave
             answers requests the gate opens and the clock runs until the slave's ConsumeQueues hold every message
             (GET_MAX_OFFSET summed over the 4 queues, polled every 5 ms): MB/s = the master's CommitLog bytes / time.
             The relay (asyncio, 1 MiB reads) is the same for both brands. Also shown: the same bytes over the time
             from the master's first data bytes through the gate (a slave's own connect/report delay excluded).
  sync send  a SYNC_MASTER with its slave connected directly: --sync-warmup sends, then --sync-messages lean sends
             (window 64) timed: msg/s; then --latency sends one at a time: p50 / p99 ms. Every answer must be
             SEND_OK (a FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE counts as a failure and is shown).

The table gives medians per brand and the ratio rmq_core / Apache. Bounded: every wait has a timeout; processes are
stopped in ``finally``; temporary directories removed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_vs_apache import BROKER_CONF, BROKER_NAME, ROOT, take_ports, wait_ready
from lean_clients import QUEUES, lean_send, p50_p99, send_frames

from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import GetMaxOffsetRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.apache_rocketmq import ApacheRocketMQ

TOPIC = "HaBench"
BODY = b"x" * 1024


# ------------------------------------------------------------------------------------------------ the gate
class Gate:
    """A TCP relay: connections are accepted at once but nothing is forwarded until ``open()``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.opened = asyncio.Event()
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.first_byte: float | None = None  # perf_counter of the master's first bytes through the gate
        self._tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await self.opened.wait()
        ur, uw = await asyncio.open_connection(*self.upstream)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, down: bool) -> None:
            try:
                while chunk := await src.read(1 << 20):
                    if down and self.first_byte is None and len(chunk) > 12:
                        self.first_byte = time.perf_counter()
                    dst.write(chunk)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        self._tasks += [asyncio.ensure_future(pipe(r, uw, False)), asyncio.ensure_future(pipe(ur, w, True))]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


# ------------------------------------------------------------------------------------------------ processes
class Pair:
    """A name server, a master and (later) a slave of one brand."""

    def __init__(self, kind: str, workdir: str, role: str) -> None:
        self.kind, self.workdir, self.role = kind, workdir, role
        self.ns_port, self.master_port = take_ports()
        _, self.slave_port = take_ports()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.apache: list[ApacheRocketMQ] = []

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def master(self) -> str:
        return f"127.0.0.1:{self.master_port}"

    @property
    def slave(self) -> str:
        return f"127.0.0.1:{self.slave_port}"

    def _conf(self, name: str, extra: dict[str, str]) -> dict[str, str]:
        return {**BROKER_CONF, "namesrvAddr": self.namesrv, "flushDiskType": "ASYNC_FLUSH", **extra}

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(os.path.join(self.workdir, log), "wb") as out:
            p = subprocess.Popen(
                [sys.executable, "-m", "rmq_core.cli", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(p)
        return p

    def _write(self, name: str, conf: dict[str, str]) -> str:
        path = os.path.join(self.workdir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        return path

    def start_master(self) -> None:
        extra = {"brokerRole": self.role, "brokerId": "0"}
        if self.kind == "rmq_core":
            conf = self._conf("m", {**extra, "listenPort": str(self.master_port)})
            conf["storePathRootDir"] = os.path.join(self.workdir, "master")
            path = self._write("master.conf", conf)
            ns = self._spawn(["namesrv", "--port", str(self.ns_port)], "namesrv.log")
            time.sleep(0.5)
            if ns.poll() is not None:
                raise RuntimeError("rmq_core name server did not start")
            wait_ready(self._spawn(["broker", "-c", path], "master.log"), self.namesrv, self.master, 60)
        else:
            a = ApacheRocketMQ(
                os.path.join(self.workdir, "apache-master"),
                broker_name=BROKER_NAME,
                extra_broker_conf={**BROKER_CONF, **extra, "brokerIP2": "127.0.0.1"},
            )
            self.apache.append(a)
            a.namesrv_port, a.broker_port = self.ns_port, self.master_port
            ns_conf, br_conf = a.write_files()
            a.namesrv_proc = a._spawn("org.apache.rocketmq.namesrv.NamesrvStartup", ns_conf, "namesrv")
            a._wait_for(a.namesrv_proc, "namesrv", "boot success", 90)
            a.broker_proc = a._spawn("org.apache.rocketmq.broker.BrokerStartup", br_conf, "broker")
            wait_ready(a.broker_proc, self.namesrv, self.master, 90)

    def start_slave(self, ha_master: str) -> None:
        extra = {"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": ha_master}
        if self.kind == "rmq_core":
            conf = self._conf("s", {**extra, "listenPort": str(self.slave_port)})
            conf["storePathRootDir"] = os.path.join(self.workdir, "slave")
            path = self._write("slave.conf", conf)
            p = self._spawn(["broker", "-c", path], "slave.log")
        else:
            a = ApacheRocketMQ(
                os.path.join(self.workdir, "apache-slave"),
                broker_name=BROKER_NAME,
                extra_broker_conf={**BROKER_CONF, **extra, "brokerIP2": "127.0.0.1", "namesrvAddr": self.namesrv},
            )
            self.apache.append(a)
            a.broker_port = self.slave_port
            _, br_conf = a.write_files()
            a.broker_proc = p = a._spawn("org.apache.rocketmq.broker.BrokerStartup", br_conf, "broker")
        header = encode_header(GetMaxOffsetRequestHeader(topic="TBW102", queueId=0))
        deadline = time.monotonic() + 90
        with BlockingRemotingClient() as c:
            while time.monotonic() < deadline:
                if p.poll() is not None:
                    raise RuntimeError(f"{self.kind} slave exited {p.returncode}")
                try:
                    r = c.invoke_sync(self.slave, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, dict(header)), 2)
                    if r.code == ResponseCode.SUCCESS:
                        return
                except (OSError, TimeoutError):
                    pass
                time.sleep(0.01)
        raise TimeoutError("slave not ready")

    @property
    def master_ha(self) -> str:
        return f"127.0.0.1:{self.master_port + 1}"

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
        for a in reversed(self.apache):
            a.stop()


def queue_total(c: BlockingRemotingClient, addr: str) -> int:
    total = 0
    for q in range(QUEUES):
        h = encode_header(GetMaxOffsetRequestHeader(topic=TOPIC, queueId=q))
        r = c.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, dict(h)), 5)
        if r.code == ResponseCode.SUCCESS:
            total += int(r.ext_fields.get("offset", 0))
    return total


def commit_log_max(c: BlockingRemotingClient, addr: str) -> int:
    import json

    r = c.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5)
    return int(json.loads(r.body)["table"]["commitLogMaxOffset"])


# ------------------------------------------------------------------------------------------------ the figures
async def catch_up(kind: str, workdir: str, backlog: int) -> tuple[float, float]:
    pair = Pair(kind, workdir, "ASYNC_MASTER")
    gate = Gate(("127.0.0.1", 0))
    try:
        pair.start_master()
        run = await lean_send(pair.master, send_frames(TOPIC, backlog, BODY), 256)
        if run.failed:
            raise RuntimeError(f"{run.failed} backlog sends failed: {run.failure_codes}")
        with BlockingRemotingClient() as c:
            nbytes = commit_log_max(c, pair.master)
        gate.upstream = ("127.0.0.1", pair.master_port + 1)
        await gate.start()
        await asyncio.to_thread(pair.start_slave, f"127.0.0.1:{gate.port}")
        t0 = time.perf_counter()
        gate.opened.set()
        deadline = time.monotonic() + 600
        with BlockingRemotingClient() as c:
            while await asyncio.to_thread(queue_total, c, pair.slave) < backlog:
                if time.monotonic() > deadline:
                    raise TimeoutError("the slave did not catch up in 600 s")
                await asyncio.sleep(0.005)
        t1 = time.perf_counter()
        first = gate.first_byte or t0
        return nbytes / (t1 - t0) / 1e6, nbytes / (t1 - first) / 1e6
    finally:
        await gate.stop()
        pair.stop()


async def sync_send(kind: str, workdir: str, warmup: int, n: int, latency_n: int) -> tuple[float, float, float, int]:
    pair = Pair(kind, workdir, "SYNC_MASTER")
    try:
        pair.start_master()
        pair.start_slave(pair.master_ha)
        deadline = time.monotonic() + 60
        while (await lean_send(pair.master, send_frames(TOPIC, 1, BODY), 1)).failed:  # until a slave acknowledges
            if time.monotonic() > deadline:
                raise TimeoutError("no slave acknowledged a SYNC_MASTER send in 60 s")
            await asyncio.sleep(0.2)
        warm = await lean_send(pair.master, send_frames(TOPIC, warmup, BODY), 64)
        run = await lean_send(pair.master, send_frames(TOPIC, n, BODY), 64)
        lat = []
        frames = send_frames(TOPIC, latency_n, BODY)
        for i in range(latency_n):
            t = time.perf_counter()
            r = await lean_send(pair.master, frames[i : i + 1], 1)
            lat.append((time.perf_counter() - t) * 1000)
            run.failed += r.failed
        p50, p99 = p50_p99(lat)
        return run.msgs_per_s, p50, p99, run.failed + warm.failed
    finally:
        pair.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backlog", type=int, default=100_000)
    ap.add_argument("--sync-warmup", type=int, default=20_000)
    ap.add_argument("--sync-messages", type=int, default=20_000)
    ap.add_argument("--latency", type=int, default=500)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.backlog, args.sync_warmup, args.sync_messages, args.latency = 1, 20_000, 5000, 5000, 200
    res: dict[str, dict[str, list[float]]] = {k: {} for k in ("rmq_core", "apache")}
    for rnd in range(args.rounds):
        order = ("rmq_core", "apache") if rnd % 2 == 0 else ("apache", "rmq_core")
        for kind in order:
            for fig in ("catch-up", "sync"):
                workdir = tempfile.mkdtemp(prefix=f"bench-ha-{kind}-")
                try:
                    if fig == "catch-up":
                        mbs, mbs_first = asyncio.run(catch_up(kind, workdir, args.backlog))
                        res[kind].setdefault("catch-up MB/s", []).append(mbs)
                        res[kind].setdefault("from 1st byte MB/s", []).append(mbs_first)
                        print(
                            f"round {rnd} {kind}: catch-up {mbs:.1f} MB/s ({mbs_first:.1f} from the first byte)",
                            flush=True,
                        )
                    else:
                        tps, p50, p99, failed = asyncio.run(
                            sync_send(kind, workdir, args.sync_warmup, args.sync_messages, args.latency)
                        )
                        res[kind].setdefault("SYNC_MASTER msg/s", []).append(tps)
                        res[kind].setdefault("SYNC_MASTER p50 ms", []).append(p50)
                        res[kind].setdefault("SYNC_MASTER p99 ms", []).append(p99)
                        print(
                            f"round {rnd} {kind}: SYNC_MASTER {tps:.0f} msg/s, window-1 p50 {p50:.2f} ms "
                            f"p99 {p99:.2f} ms, failed {failed}",
                            flush=True,
                        )
                except Exception as e:
                    print(f"round {rnd} {kind} {fig}: FAILED {type(e).__name__}: {e}", flush=True)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
    print("\nmedians (rounds: %d)" % args.rounds)
    print(f"{'figure':24} {'rmq_core':>12} {'apache':>12} {'ratio':>8}")
    for key in ("catch-up MB/s", "from 1st byte MB/s", "SYNC_MASTER msg/s", "SYNC_MASTER p50 ms", "SYNC_MASTER p99 ms"):
        a = res["rmq_core"].get(key)
        b = res["apache"].get(key)
        ma = statistics.median(a) if a else None
        mb = statistics.median(b) if b else None
        ratio = f"{ma / mb:.2f}" if ma and mb else "-"
        print(f"{key:24} {ma or 0:12.2f} {mb or 0:12.2f} {ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
