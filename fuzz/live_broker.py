"""Mutated remoting frames fed to a live broker: a name server and a broker run in this process on 127.0.0.1, one
client connection pipelines mutated frames (the seed corpus of fuzz/corpus/remoting_frame, length-prefixed, with bit
flips, truncations, splices, extreme length and size fields and random bytes; one input in 16 is sent without its
length prefix), and a second connection asks the broker a valid question every 500 inputs, which must be answered
within 2 s. A bad frame closes only its own connection (the fuzzing connection is reopened); nothing may crash the
broker or stop it serving the other connection.

    .venv/bin/python fuzz/live_broker.py --inputs 200000

Prints the counts: inputs, connections the broker closed, probes answered (must be all), the probe's worst latency.
Exit status 1 when a probe fails or the broker stops. Thread-safety: one drain thread per fuzzing connection.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import GetMaxOffsetRequestHeader, encode_header

CORPUS = Path(__file__).resolve().parent / "corpus" / "remoting_frame"


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            del data[rng.randrange(len(data)) :]
        elif op == 2:
            other = rng.choice(seeds)
            i = rng.randrange(len(data) + 1)
            data[i:i] = other[: rng.randrange(len(other) + 1)]
        elif op == 3:
            i = rng.randrange(len(data) + 1)
            data[i : i + 4] = struct.pack(">i", rng.choice([0, -1, 1, 2**31 - 1, -(2**31), 91, 4096]))
        else:
            data += os.urandom(rng.randrange(1, 16))
    return bytes(data)


class FuzzConnection:
    """A connection that is written to and drained; ``closed`` once the broker closes it."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.sock = socket.create_connection(addr, timeout=5)
        self.closed = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        try:
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        self.closed.set()

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed.set()
            return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def probe(sock: socket.socket) -> float:
    """GET_MAX_OFFSET on the probe connection; seconds until its answer (raises on none within the timeout)."""
    req = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, encode_header(GetMaxOffsetRequestHeader(topic="TBW102", queueId=0))
    )
    t0 = time.monotonic()
    sock.sendall(req.encode())
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("the broker closed the probe connection")
        head += chunk
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            raise ConnectionError("the broker closed the probe connection")
        body += chunk
    resp = RemotingCommand.decode_frame(body)
    if resp.opaque != req.opaque or resp.code not in (ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR):
        raise RuntimeError(f"unexpected probe answer {resp.code} {resp.remark}")
    return time.monotonic() - t0


def run(inputs: int, seed: int = 1) -> dict[str, float | int]:
    seeds = [p.read_bytes() for p in sorted(CORPUS.iterdir())]
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix="rmq-fuzz-live-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the broker's store: gone when the process ends
    with NameServer(listen_port=0) as ns:
        cfg = BrokerConfig(
            listen_port=0, namesrv_addr=ns.address, store_path_root_dir=work, broker_name="fuzz-broker",
            mapped_file_size_commit_log=4 * 1024 * 1024, mapped_file_size_consume_queue=60_000,
        )  # fmt: skip
        with Broker(cfg) as broker:
            host, port = broker.address.rsplit(":", 1)
            addr = (host, int(port))
            prober = socket.create_connection(addr, timeout=2)
            conn = FuzzConnection(addr)
            closed = probes = 0
            worst = 0.0
            for i in range(inputs):
                data = mutate(rng, seeds)
                frame = data if rng.randrange(16) == 0 else struct.pack(">i", len(data)) + data
                if conn.closed.is_set() or not conn.send(frame):
                    conn.close()
                    closed += 1
                    conn = FuzzConnection(addr)
                    conn.send(frame)
                if i % 500 == 499:
                    worst = max(worst, probe(prober))
                    probes += 1
            worst = max(worst, probe(prober))
            probes += 1
            conn.close()
            prober.close()
    return {"inputs": inputs, "connections closed by the broker": closed, "probes answered": probes,
            "worst probe s": round(worst, 4)}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    t0 = time.monotonic()
    try:
        result = run(a.inputs, a.seed)
    except (OSError, RuntimeError) as e:
        print(f"FAILED: {type(e).__name__}: {e}")
        return 1
    print(", ".join(f"{k}: {v}" for k, v in result.items()), f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
