"""The native gRPC front's transport cost: the server process's CPU-seconds per 10k unary echo RPCs over
``_core.GrpcFront`` + an asyncio loop (uvloop; ``loop.add_reader(front.fileno(), ...)``, drain, ``finish``) against a
grpc.aio generic echo server on uvloop (as the broker ran it), same grpcio client (--clients processes, grpc.aio,
--inflight calls in flight each), alternating rounds, one server process per round; CPU from /proc/<pid>/stat
(utime+stime, all threads; the loop thread's own share printed beside it) around the timed calls. No broker: what
HTTP/2 + gRPC framing costs per call where each runs (docs/GRPC_DESIGN.md, "The native front"). ``--tls``: both
servers and the clients speak TLS (the broker's self-signed test certificate; grpc.aio on its own TLS port, without
the first-byte relay the broker put before it).

    .venv/bin/python benches/bench_grpc_front.py                      # 4 rounds x 20k calls, 4 clients x 32
    .venv/bin/python benches/bench_grpc_front.py --worker-threads 2 --payload 4096
    .venv/bin/python benches/bench_grpc_front.py --tls
Linux only (/proc); 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"


def tls_pem(cert_dir: str) -> tuple[bytes, bytes]:
    """(key, certificate) PEM for 127.0.0.1, made once in ``cert_dir``."""
    from rmq_core.broker.grpc.grpc_tls_front import self_signed_cert

    return self_signed_cert(cert_dir, "127.0.0.1")


def server_front(worker_threads: int, cert_dir: str) -> None:
    import uvloop

    from rmq_core import _core

    key, cert = tls_pem(cert_dir) if cert_dir else (None, None)

    async def main() -> None:
        f = _core.GrpcFront(
            "127.0.0.1", 0, client_streaming=[], worker_threads=worker_threads, tls_cert_pem=cert, tls_key_pem=key
        )
        loop = asyncio.get_running_loop()

        def ready() -> None:
            for kind, cid, payload in f.drain():
                if kind == _core.GRPC_CALL:
                    f.finish(cid, 0, "", payload[4])

        loop.add_reader(f.fileno(), ready)
        print(f.port, flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


def server_aio(cert_dir: str) -> None:
    import grpc
    import uvloop

    async def echo(req: bytes, ctx) -> bytes:  # type: ignore[no-untyped-def]
        return req

    async def main() -> None:
        server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", 8 << 20), ("grpc.max_concurrent_streams", 256)]
        )
        handler = grpc.method_handlers_generic_handler(
            "apache.rocketmq.v2.MessagingService", {"SendMessage": grpc.unary_unary_rpc_method_handler(echo)}
        )
        server.add_generic_rpc_handlers((handler,))
        if cert_dir:
            key, cert = tls_pem(cert_dir)
            port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
        else:
            port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()

    uvloop.run(main())


def client(port: int, calls: int, inflight: int, size: int, cert_dir: str, start_evt, done_q) -> None:  # type: ignore[no-untyped-def]
    import grpc

    payload = b"m" * size
    target = f"127.0.0.1:{port}"

    async def main() -> None:
        if cert_dir:
            creds = grpc.ssl_channel_credentials(root_certificates=tls_pem(cert_dir)[1])
            channel = grpc.aio.secure_channel(target, creds)
        else:
            channel = grpc.aio.insecure_channel(target)
        async with channel as ch:
            stub = ch.unary_unary(METHOD)
            for _ in range(50):
                await stub(payload)
            done_q.put("warm")
            start_evt.wait()
            n = calls // inflight

            async def worker() -> None:
                for _ in range(n):
                    r = await stub(payload)
                    assert r == payload

            await asyncio.gather(*(worker() for _ in range(inflight)))
            done_q.put("done")

    asyncio.run(main())


def cpu_s(pid: int, tid: int | None = None) -> float:
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def one_round(args: argparse.Namespace, kind: str) -> tuple[float, float]:
    clients, calls, inflight = args.clients, args.calls, args.inflight
    arg = f"front{args.worker_threads}" if kind == "front" else "aio"
    proc = subprocess.Popen([sys.executable, __file__, "serve", arg, args.cert_dir], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        ctx = mp.get_context("fork")
        start, q = ctx.Event(), ctx.Queue()
        ps = [
            ctx.Process(target=client, args=(port, calls // clients, inflight, args.payload, args.cert_dir, start, q))
            for _ in range(clients)
        ]
        for p in ps:
            p.start()
        for _ in ps:
            assert q.get(timeout=60) == "warm"
        c0, m0, t0 = cpu_s(proc.pid), cpu_s(proc.pid, proc.pid), time.monotonic()
        start.set()
        for _ in ps:
            assert q.get(timeout=300) == "done"
        c1, m1, t1 = cpu_s(proc.pid), cpu_s(proc.pid, proc.pid), time.monotonic()
        for p in ps:
            p.join()
        print(f"  main (loop) thread {(m1 - m0) / calls * 10_000:.3f} CPU-s / 10k", flush=True)
        return (c1 - c0) / calls * 10_000, calls / (t1 - t0)
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4, help="client processes")
    ap.add_argument("--inflight", type=int, default=32, help="calls in flight per client process")
    ap.add_argument("--calls", type=int, default=20_000, help="timed calls per round (all clients)")
    ap.add_argument("--payload", type=int, default=600, help="request (= answer) bytes")
    ap.add_argument("--worker-threads", type=int, default=1, help="GrpcFront's tokio threads")
    ap.add_argument("--tls", action="store_true", help="TLS between the clients and both servers")
    args = ap.parse_args()
    args.cert_dir = tempfile.mkdtemp(prefix="bench-grpc-tls-") if args.tls else ""
    if args.tls:
        tls_pem(args.cert_dir)  # made once, before the servers and clients read it
    rounds = args.rounds
    res: dict[str, list[tuple[float, float]]] = {"front": [], "aio": []}
    for r in range(rounds):
        for kind in ("front", "aio") if r % 2 == 0 else ("aio", "front"):
            cpu, rate = one_round(args, kind)
            res[kind].append((cpu, rate))
            print(f"round {r} {kind:5s}: server {cpu:.3f} CPU-s / 10k RPCs, {rate:.0f} RPC/s", flush=True)
    for kind, v in res.items():
        print(
            f"{kind:5s}: median {statistics.median(c for c, _ in v):.3f} CPU-s/10k "
            f"(runs {', '.join(f'{c:.3f}' for c, _ in v)}), median {statistics.median(r for _, r in v):.0f} RPC/s"
        )
    print(
        f"clients={args.clients} x inflight={args.inflight}, {args.calls} calls a round, payload {args.payload} B, "
        f"front worker_threads={args.worker_threads}{', TLS' if args.tls else ''}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "serve":
        if sys.argv[2] == "aio":
            server_aio(sys.argv[3])
        else:
            server_front(int(sys.argv[2][5:]), sys.argv[3])
    else:
        main()
