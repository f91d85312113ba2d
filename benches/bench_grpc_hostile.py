"""Hostile gRPC clients against a real broker process (`rmq-core serve --grpc-port 0`: its RSS is measurable): a
hand-made HTTP/2 client (tests/support/raw_h2.py) that opens ReceiveMessage streams (batch 32 over a topic filled
with --msgs bodies of --body-kib) and Telemetry streams (each writing --settings Settings) on --conns connections and
never reads its socket; a normal grpcio client receives alongside. Prints the broker's RSS before, at the peak while
the streams are held (--hold-s), after they leave, and the normal receive's time.

    .venv/bin/python benches/bench_grpc_hostile.py --conns 1 --receives 1000            # the per-connection bound
    .venv/bin/python benches/bench_grpc_hostile.py --conns 1 --telemetry 250 --settings 400
Only 127.0.0.1; the broker is killed on exit.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import grpc  # noqa: E402

from rmq_core.broker.grpc.messaging_v2 import SERVICE, V2, ClientType  # noqa: E402
from rmq_core.client.producer import Producer  # noqa: E402
from rmq_core.message import Message  # noqa: E402
from rmq_core.testing.topic_admin import create_topic  # noqa: E402

from support.grpc5_helpers import receive_request  # noqa: E402
from support.raw_h2 import RawH2  # noqa: E402


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+)", f.read())
    return int(m.group(1)) / 1024 if m else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--receives", type=int, default=0, help="ReceiveMessage streams in all")
    ap.add_argument("--telemetry", type=int, default=0, help="Telemetry streams in all")
    ap.add_argument("--settings", type=int, default=100, help="Settings written on each Telemetry stream")
    ap.add_argument("--msgs", type=int, default=16000)
    ap.add_argument("--body-kib", type=int, default=4)
    ap.add_argument("--hold-s", type=float, default=8.0)
    a = ap.parse_args()
    store = tempfile.mkdtemp(prefix="grpc-hostile-")
    cmd = [sys.executable, "-m", "rmq_core.cli", "serve", "--dir", store, "--namesrv-port", "0", "--port", "0"]
    broker = subprocess.Popen(
        [*cmd, "--grpc-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ)
    )
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        namesrv = line.split("name server ", 1)[1].split(",", 1)[0]
        addr = line.rsplit("gRPC ", 1)[1].strip()
        create_topic(namesrv, "HostileT", 4)
        create_topic(namesrv, "NormalT", 1)
        producer = Producer("hostile_bench_pg", namesrv_addr=namesrv)
        producer.start()
        for _ in range(a.msgs):
            producer.send(Message("HostileT", b"x" * (a.body_kib * 1024)))
        producer.send(Message("NormalT", b"normal"))
        producer.shutdown()
        time.sleep(1)
        before = rss_mib(broker.pid)
        conns = [RawH2(addr) for _ in range(a.conns)]
        poll = receive_request("hostile_cg", "HostileT", invisible_ms=60_000, poll_ms=20_000).SerializeToString()
        for i in range(a.receives):
            conns[i % a.conns].open("ReceiveMessage", f"hostile-{i}", poll, end=True)
        settings = V2.Settings(client_type=ClientType.SIMPLE_CONSUMER)
        settings.subscription.group.name = "hostile_cg"
        settings.subscription.subscriptions.add().topic.name = "HostileT"
        streams = []
        for i in range(a.telemetry):
            c = conns[i % a.conns]
            streams.append(
                (
                    c,
                    c.open(
                        "Telemetry", f"hostile-t-{i}", V2.TelemetryCommand(settings=settings).SerializeToString(), False
                    ),
                )
            )
        refused = 0
        for _ in range(a.settings - 1):
            for c, sid in streams:
                try:
                    c.send(sid, V2.TelemetryCommand(settings=settings).SerializeToString())
                except OSError:
                    refused += 1
        peak, end = before, time.monotonic() + a.hold_s
        while time.monotonic() < end:
            peak = max(peak, rss_mib(broker.pid))
            time.sleep(0.1)
        with grpc.insecure_channel(addr) as ch:
            t = time.monotonic()
            frames = list(
                ch.unary_stream(
                    f"/{SERVICE}/ReceiveMessage",
                    request_serializer=V2.ReceiveMessageRequest.SerializeToString,
                    response_deserializer=V2.ReceiveMessageResponse.FromString,
                )(
                    receive_request("normal_cg", "NormalT", invisible_ms=60_000, poll_ms=5_000),
                    metadata=(("x-mq-client-id", "normal"),),
                    timeout=20,
                )
            )
            took = time.monotonic() - t
        got = [f.message.body for f in frames if f.WhichOneof("content") == "message"]
        for c in conns:
            c.close()
        time.sleep(3)
        print(
            f"conns {a.conns} receives {a.receives} telemetry {a.telemetry}x{a.settings} "
            f"(msgs {a.msgs} x {a.body_kib} KiB): broker RSS before {before:.0f} MiB, peak {peak:.0f} MiB, "
            f"after {rss_mib(broker.pid):.0f} MiB; normal receive {got} in {took * 1000:.0f} ms"
            + (f"; {refused} Settings writes failed (connection reset)" if refused else "")
        )
        return 0
    finally:
        broker.kill()
        broker.wait(30)


if __name__ == "__main__":
    sys.exit(main())
