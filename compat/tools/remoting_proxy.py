"""A logging TCP proxy for RocketMQ remoting traffic: it forwards every frame between a client and an upstream
(a name server or a broker; unchanged but for the address rewrite below) and writes one JSON line per frame, so a
client's wire behaviour (request codes, header fields, serialize type, version, bodies) and what it got back can be
read afterwards.

Several routes can run in one proxy (typically the name server and the broker). Addresses of the upstreams that
appear in the bodies of upstream → client frames (route data, cluster info) are rewritten to the proxy's own
listening addresses, so a client that learns the broker from the name server keeps talking through the proxy.
Only the body is rewritten; the header bytes and the serialize-type byte are forwarded exactly as received.

Log line fields: ``t`` (unix seconds), ``route``, ``conn`` (connection number), ``dir`` ("c2s" / "s2c"),
``serialize`` ("JSON" / "ROCKETMQ" / the raw type byte), ``header`` (the decoded header: code, language, version,
opaque, flag, remark, extFields; plus ``raw`` with the JSON header text exactly as sent), ``body_len``, ``body``
(UTF-8 text when the body decodes, else ``body_hex``: all of it, or the first ``max_hex_bytes``), ``rewritten`` when
a body changed (``body`` is logged as the upstream sent it).

Invariants:
1. Frames are forwarded whole and in order per direction; nothing is reordered, merged or dropped.
2. A frame that cannot be decoded is still forwarded verbatim and logged with ``error``.
3. Closing either side of a connection closes the other.

Thread-safety: the proxy runs its own asyncio loop on a background thread (``start()`` returns once listening,
``close()`` stops it); the log file is written only from that thread. ``records()`` reads the log file and may
be called from any thread.

Command line:
    python compat/tools/remoting_proxy.py --log wire.jsonl \\
        --route 127.0.0.1:19876=127.0.0.1:9876 --route 127.0.0.1:20911=127.0.0.1:10911
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

SERIALIZE_NAMES = {0: "JSON", 1: "ROCKETMQ"}
LANGUAGES = [
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
    "NODE_JS",
]
MAX_FRAME = 16 * 1024 * 1024


def decode_header(serialize_type: int, header: bytes) -> dict[str, Any]:
    """The header of one frame as a dict; the JSON text is kept verbatim under ``raw``."""
    if serialize_type == 0:
        text = header.decode("utf-8", errors="replace")
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("JSON header is not an object")
        doc["raw"] = text
        return doc
    if serialize_type == 1:
        code, lang, version, opaque, flag = struct.unpack_from(">hBhii", header, 0)
        pos = 13
        (rl,) = struct.unpack_from(">i", header, pos)
        pos += 4
        remark = header[pos : pos + rl].decode("utf-8", errors="replace") if rl > 0 else None
        pos += max(rl, 0)
        (el,) = struct.unpack_from(">i", header, pos)
        pos += 4
        end = pos + el
        ext: dict[str, str] = {}
        while pos < end:
            (kl,) = struct.unpack_from(">h", header, pos)
            pos += 2
            key = header[pos : pos + kl].decode("utf-8", errors="replace")
            pos += kl
            (vl,) = struct.unpack_from(">i", header, pos)
            pos += 4
            ext[key] = header[pos : pos + vl].decode("utf-8", errors="replace")
            pos += vl
        return {
            "code": code,
            "language": LANGUAGES[lang] if lang < len(LANGUAGES) else lang,
            "version": version,
            "opaque": opaque,
            "flag": flag,
            "remark": remark,
            "extFields": ext,
        }
    raise ValueError(f"unknown serialize type {serialize_type}")


def describe_body(body: bytes, max_hex_bytes: int | None = None) -> dict[str, Any]:
    """``body`` as text when it is UTF-8, else as hex (all of it, or the first ``max_hex_bytes``)."""
    if not body:
        return {"body_len": 0}
    try:
        return {"body_len": len(body), "body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_len": len(body), "body_hex": body[:max_hex_bytes].hex()}


@dataclass
class Route:
    """One listening address forwarding to one upstream."""

    listen_host: str
    listen_port: int
    upstream_host: str
    upstream_port: int
    name: str = ""
    server: asyncio.AbstractServer | None = field(default=None, repr=False)

    @property
    def upstream(self) -> str:
        return f"{self.upstream_host}:{self.upstream_port}"

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"


class RemotingProxy:
    """Logging proxy over one or more routes; see the module docstring."""

    def __init__(self, log_path: str, rewrite_addresses: bool = True, max_hex_bytes: int | None = None) -> None:
        self.log_path = log_path
        self.rewrite_addresses = rewrite_addresses
        self.max_hex_bytes = max_hex_bytes
        self.routes: list[Route] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._log: TextIO | None = None
        self._conn_seq = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    def add_route(self, upstream: str, listen: str = "127.0.0.1:0", name: str = "") -> Route:
        """Declare a route before ``start()``; port 0 picks a free port (read ``route.address`` after start)."""
        lh, lp = listen.rsplit(":", 1)
        uh, up = upstream.rsplit(":", 1)
        route = Route(lh, int(lp), uh, int(up), name or upstream)
        self.routes.append(route)
        return route

    # --- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as e:  # reported to start()
                failure.append(e)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115  (closed by stop())
        self._thread = threading.Thread(target=run, name="remoting-proxy", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._log.close()
            raise failure[0]

    def close(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> RemotingProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def records(self) -> list[dict[str, Any]]:
        with open(self.log_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    # --- loop side -------------------------------------------------------------------------------------------
    async def _listen(self) -> None:
        for route in self.routes:
            route.server = await asyncio.start_server(
                functools.partial(self._on_client, route), route.listen_host, route.listen_port
            )
            route.listen_port = route.server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        for route in self.routes:
            if route.server is not None:
                route.server.close()
                await route.server.wait_closed()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_client(self, route: Route, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self._conn_seq += 1
        conn = self._conn_seq
        self._writers.add(c_writer)
        try:
            u_reader, u_writer = await asyncio.open_connection(route.upstream_host, route.upstream_port)
        except OSError as e:
            self._write({"route": route.name, "conn": conn, "error": f"upstream {route.upstream}: {e}"})
            c_writer.close()
            self._writers.discard(c_writer)
            return
        self._writers.add(u_writer)
        self._write(
            {
                "route": route.name,
                "conn": conn,
                "event": "open",
                "client": "%s:%s" % c_writer.get_extra_info("peername")[:2],
            }
        )
        self._spawn(self._pump(route, conn, "c2s", c_reader, u_writer, c_writer))
        self._spawn(self._pump(route, conn, "s2c", u_reader, c_writer, u_writer))

    async def _pump(
        self,
        route: Route,
        conn: int,
        direction: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        other: asyncio.StreamWriter,
    ) -> None:
        try:
            while True:
                try:
                    head = await reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    break
                (length,) = struct.unpack(">i", head)
                if length < 4 or length > MAX_FRAME:
                    self._write(
                        {
                            "route": route.name,
                            "conn": conn,
                            "dir": direction,
                            "error": f"frame length {length}; forwarding the rest raw",
                        }
                    )
                    writer.write(head)
                    while chunk := await reader.read(65536):
                        writer.write(chunk)
                    break
                frame = await reader.readexactly(length)
                frame = self._observe(route, conn, direction, frame)
                writer.write(struct.pack(">i", len(frame)) + frame)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._write({"route": route.name, "conn": conn, "dir": direction, "event": "eof"})
            for w in (writer, other):
                w.close()
                self._writers.discard(w)

    def _observe(self, route: Route, conn: int, direction: str, frame: bytes) -> bytes:
        (mark,) = struct.unpack_from(">i", frame, 0)
        stype, hlen = (mark >> 24) & 0xFF, mark & 0xFFFFFF
        rec: dict[str, Any] = {
            "route": route.name,
            "conn": conn,
            "dir": direction,
            "serialize": SERIALIZE_NAMES.get(stype, stype),
            "mark_hex": f"{mark & 0xFFFFFFFF:08x}",
        }
        header, body = frame[4 : 4 + hlen], frame[4 + hlen :]
        try:
            rec["header"] = decode_header(stype, header)
        except (ValueError, struct.error, IndexError) as e:
            rec["error"] = f"header: {e}"
            rec["header_hex"] = header[:256].hex()
        rec.update(describe_body(body, self.max_hex_bytes))
        if direction == "s2c" and self.rewrite_addresses and body:
            new_body = body
            for r in self.routes:
                new_body = new_body.replace(r.upstream.encode(), r.address.encode())
            if new_body != body:
                rec["rewritten"] = True
                frame = frame[: 4 + hlen] + new_body
        self._write(rec)
        return frame

    def _write(self, rec: dict[str, Any]) -> None:
        if self._log is None:
            return
        rec = {"t": round(time.time(), 6), **rec}
        self._log.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._log.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", required=True, help="JSON-lines output file (appended)")
    ap.add_argument(
        "--route",
        action="append",
        required=True,
        metavar="LISTEN=UPSTREAM",
        help="host:port to listen on = host:port to forward to (repeatable)",
    )
    ap.add_argument("--no-rewrite", action="store_true", help="do not rewrite upstream addresses in bodies")
    ap.add_argument("--max-hex-bytes", type=int, default=None, help="log at most this many bytes of binary bodies")
    args = ap.parse_args(argv)
    proxy = RemotingProxy(args.log, rewrite_addresses=not args.no_rewrite, max_hex_bytes=args.max_hex_bytes)
    for spec in args.route:
        listen, upstream = spec.split("=", 1)
        proxy.add_route(upstream, listen)
    proxy.start()
    for r in proxy.routes:
        print(f"{r.address} -> {r.upstream}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
