"""``Node``: a name server and N broker processes on one machine, one cluster — RocketMQ's answer to more load (more
broker groups), one broker per core, started and supervised as one thing.

Layout: broker ``i`` is ``<name>-<i>``, a child process (``rmq-core broker``) over ``<root>/<name>-<i>`` on
``base_port + PORT_STEP * i``; the name server in this process (or ``namesrv_addr``'s; ``slave_of``: slaves).
Invariants: a dead broker is restarted over its own store after a growing backoff; more than ``max_restarts`` exits
within ``restart_window_s`` stop the node with the cause (``failure``), never a restart loop; ``shutdown`` stops the
brokers (SIGTERM) before the name server; brokers die with the node (PDEATHSIG), not with a terminal's Ctrl-C.
Thread-safety: ``start`` from one thread; a supervisor thread restarts brokers; ``shutdown`` from any thread (one at a
time does the work); the addresses may be read from any thread.
Details: docs/BROKER_DESIGN.md, 'Node: one cluster on one machine'.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import IO, Self

from rmq_core.namesrv import NameServer

log = logging.getLogger(__name__)

PORT_STEP = 4  # broker i: listen port base + 4 i, HA port base + 4 i + 1
LOCK_FILE = "node.lock"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
_PR_SET_PDEATHSIG = 1


class NodeError(Exception):
    """A node that cannot start (a port in use, a store root in use, a broker that never came up)."""


def cores_available() -> int:
    """The cores this process may run on (``--brokers auto``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class GrpcTls:
    """The gRPC TLS options a node gives each broker (``--grpc-tls-cert/--grpc-tls-key``, ``--grpc-tls-self-signed``:
    each broker makes its own certificate in its store)."""

    cert_file: str | None = None
    key_file: str | None = None
    self_signed: bool = False

    def flags(self) -> list[str]:
        out = ["--grpc-tls-cert", os.path.abspath(self.cert_file)] if self.cert_file else []
        out += ["--grpc-tls-key", os.path.abspath(self.key_file)] if self.key_file else []
        return out + (["--grpc-tls-self-signed"] if self.self_signed else [])


@dataclass
class NodeBroker:
    """One broker of the node: its name, port, store directory, and its process while it runs."""

    name: str
    port: int
    store_dir: str
    grpc_port: int | None = None  # its gRPC MessagingService port (``--grpc-port`` + the broker's index), if any
    process: subprocess.Popen[bytes] | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    exits: deque[float] = field(default_factory=deque)  # when it exited unexpectedly, within the restart window
    restart_at: float | None = None


class Node:
    """See the module docstring. ``Node(brokers=2, store_path_root_dir=...)`` as a context manager, or ``start()``
    then ``shutdown()``."""

    def __init__(
        self,
        brokers: int | str = 1,
        *,
        store_path_root_dir: str = "./rmq-store",
        namesrv_port: int = 9876,
        base_port: int = 10911,
        cluster: str = "DefaultCluster",
        name: str | None = None,
        host: str = "127.0.0.1",
        broker_conf: str | None = None,
        max_restarts: int = 5,
        restart_window_s: float = 60.0,
        restart_backoff_s: tuple[float, float] = (1.0, 30.0),
        out: IO[str] | None = None,
        namesrv_addr: str | None = None,
        slave_of: str | None = None,
        grpc_port: int | None = None,
        grpc_tls: GrpcTls | None = None,
    ) -> None:
        count = cores_available() if brokers == "auto" else int(brokers)
        if count < 1:
            raise NodeError(f"a node needs at least one broker, not {brokers!r}")
        self.host = host
        self.cluster = cluster
        self.name = name or (socket.gethostname().split(".")[0] or "broker")
        self.store_path_root_dir = store_path_root_dir
        self.namesrv_port = namesrv_port
        self.broker_conf = broker_conf
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.restart_backoff_s = restart_backoff_s
        self.out = out or sys.stdout
        self.slave_of = slave_of  # a master node's name server: this node's brokers are their slaves (brokerId 1)
        self.external_namesrv = slave_of or namesrv_addr  # then no name server of its own
        self.grpc_tls = grpc_tls  # each broker's gRPC TLS (the same certificate, or each its own self-signed one)
        ports = _free_block(host, PORT_STEP * count) if base_port == 0 else base_port
        self.brokers = [
            NodeBroker(
                f"{self.name}-{i}",
                ports + PORT_STEP * i,
                os.path.join(store_path_root_dir, f"{self.name}-{i}"),
                None if grpc_port is None else (grpc_port + i if grpc_port else 0),
            )
            for i in range(count)
        ]
        self.namesrv: NameServer | None = None
        self.failure: str | None = None  # why the node gave up on a broker
        self.failed_stops: list[str] = []
        self._stopping = threading.Event()
        self._lock_fd: int | None = None
        self._supervisor: threading.Thread | None = None
        self._out_lock = threading.Lock()
        self._relays: list[threading.Thread] = []
        self._shutdown_lock = threading.Lock()
        self._started = False  # every broker came up once: from then on an exit means a restart

    # --- public ----------------------------------------------------------------------------------------------
    @property
    def namesrv_addr(self) -> str:
        if self.external_namesrv is not None:
            return self.external_namesrv
        if self.namesrv is None:
            raise RuntimeError("the node is not started")
        return self.namesrv.address

    @property
    def broker_addrs(self) -> dict[str, str]:
        return {b.name: f"{self.host}:{b.port}" for b in self.brokers}

    @property
    def ok(self) -> bool:
        return self.failure is None and not self.failed_stops

    def start(self) -> Self:
        """Lock the store root, check every port, start the name server and every broker; return once each broker
        is registered. NodeError (nothing left running) when any of that fails. A node starts once."""
        if self._stopping.is_set() or self._supervisor is not None:
            raise RuntimeError("a Node starts once: make a new one")
        os.makedirs(self.store_path_root_dir, exist_ok=True)
        self._lock_store_root()
        try:
            self._check_ports()
            if self.external_namesrv is None:
                self.namesrv = NameServer(listen_port=self.namesrv_port, host=self.host).start()
            if self.slave_of is not None:
                self.broker_conf = self._slave_conf()
            # one long-lived thread starts every broker process: PDEATHSIG follows the thread that forked
            self._supervisor = threading.Thread(target=self._supervise, name="rmq-node-supervisor", daemon=True)
            self._supervisor.start()
            self._wait_ready()
            self._started = True
        except BaseException:
            self.shutdown()
            raise
        return self

    def shutdown(self) -> None:
        """Stop every broker (SIGTERM, then SIGKILL past STOP_TIMEOUT_S), then the name server. Idempotent; the
        supervisor calls it too (a crash loop), so one caller at a time does the work."""
        self._stopping.set()
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join()
        with self._shutdown_lock:
            self._stop_all()

    def _stop_all(self) -> None:
        running = [b for b in self.brokers if b.process is not None and b.process.poll() is None]
        for b in running:
            assert b.process is not None
            b.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for b in running:
            assert b.process is not None
            try:
                code = b.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                b.process.kill()
                code = b.process.wait()
            if code != 0:
                self.failed_stops.append(f"{b.name} exited with {code} when stopped")
                log.error("%s exited with %s when stopped", b.name, code)
        for relay in self._relays:
            relay.join(5.0)  # every line the brokers wrote is out before the node says it stopped
        if self.namesrv is not None:
            self.namesrv.shutdown()
        self._unlock_store_root()

    def say(self, line: str) -> None:
        """``line`` on the node's output, whole: the brokers' relayed lines never interleave with it."""
        with self._out_lock:
            print(line, file=self.out, flush=True)

    def wait(self, poll_s: float = 0.2) -> None:
        """Block until the node gives up on a broker or ``shutdown`` is called from another thread."""
        while self.failure is None and not self._stopping.is_set():
            time.sleep(poll_s)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- start -----------------------------------------------------------------------------------------------
    def _lock_store_root(self) -> None:
        path = os.path.join(self.store_path_root_dir, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise NodeError(
                    f"the store root {self.store_path_root_dir} is in use by another node ({path})"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _unlock_store_root(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing releases the flock

    def _slave_conf(self) -> str:
        """The brokers' broker.conf as slaves: the given one's settings, brokerRole SLAVE, brokerId 1."""
        from rmq_core.broker.broker_config import parse_properties

        props: dict[str, str] = {}
        if self.broker_conf:
            with open(self.broker_conf, encoding="utf-8") as f:
                props = parse_properties(f.read())
            # files found beside the given broker.conf stay found there (plain_acl.yml)
            props.setdefault(
                "aclFile", os.path.join(os.path.dirname(os.path.abspath(self.broker_conf)), "plain_acl.yml")
            )
        props.update(brokerRole="SLAVE", brokerId="1")
        path = os.path.join(self.store_path_root_dir, "node-slave.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        return path

    def _check_ports(self) -> None:
        own = self.namesrv_port and self.external_namesrv is None
        wanted = [(self.namesrv_port, "the name server's port")] if own else []
        for b in self.brokers:
            wanted += [(b.port, f"{b.name}'s port"), (b.port + 1, f"{b.name}'s HA port")]
        for port, what in wanted:
            if not _port_free(self.host, port):
                raise NodeError(
                    f"port {port} ({what}) on {self.host} is in use: choose others with --namesrv-port / --port"
                )

    def _command(self, b: NodeBroker) -> list[str]:
        cmd = [sys.executable, "-m", "rmq_core.cli", "broker", "-n", self.namesrv_addr, "--host", self.host]
        cmd += ["--dir", b.store_dir, "--port", str(b.port), "--name", b.name, "--cluster", self.cluster]
        if b.grpc_port is not None:
            cmd += ["--grpc-port", str(b.grpc_port)]
            cmd += self.grpc_tls.flags() if self.grpc_tls is not None else []
        return cmd + (["-c", self.broker_conf] if self.broker_conf else [])

    def _spawn(self, b: NodeBroker) -> None:
        b.ready.clear()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        b.process = subprocess.Popen(
            self._command(b),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent,
            start_new_session=True,  # a terminal's Ctrl-C reaches the node only; the node stops its brokers
        )
        relay = threading.Thread(target=self._relay, args=(b, b.process), name=f"rmq-node-{b.name}-out", daemon=True)
        relay.start()
        self._relays.append(relay)

    def _relay(self, b: NodeBroker, process: subprocess.Popen[bytes]) -> None:
        """Each line the broker writes, prefixed with its name; the start line marks it ready."""
        assert process.stdout is not None
        with process.stdout:
            for raw in process.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("rmq-core broker: "):
                    b.ready.set()
                with self._out_lock:
                    print(f"[{b.name}] {line}", file=self.out, flush=True)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for b in self.brokers:
            while not b.ready.wait(0.1):
                if self.failure is not None:
                    raise NodeError(self.failure)
                if time.monotonic() > deadline:
                    raise NodeError(f"{b.name} did not start within {READY_TIMEOUT_S:.0f} s")
        if self.namesrv is None:  # another name server: each broker registered before it printed its start line
            return
        names = {b.name for b in self.brokers}
        while names - self._registered():
            if time.monotonic() > deadline:
                raise NodeError("the brokers did not register with the name server in time")
            time.sleep(0.05)

    def _registered(self) -> set[str]:
        namesrv = self.namesrv
        assert namesrv is not None
        return namesrv.call(lambda: set(namesrv.route_info_manager.broker_addr_table))

    # --- supervision -----------------------------------------------------------------------------------------
    def _supervise(self) -> None:
        for b in self.brokers:
            self._spawn(b)
        while not self._stopping.wait(0.2):
            now = time.monotonic()
            for b in self.brokers:
                if b.restart_at is not None:
                    if now >= b.restart_at:
                        b.restart_at = None
                        log.warning("restarting %s over %s", b.name, b.store_dir)
                        self._spawn(b)
                    continue
                code = b.process.poll() if b.process is not None else None
                if code is None:
                    continue
                self._on_exit(b, code, now)
                if self.failure is not None:
                    if self._started:
                        self.shutdown()  # the node stops with the cause (the other brokers cleanly)
                    return

    def _on_exit(self, b: NodeBroker, code: int, now: float) -> None:
        if not self._started:
            self.failure = f"{b.name} exited with {code} while starting (see its lines above)"
            b.process = None
            return
        b.exits.append(now)
        while b.exits and now - b.exits[0] > self.restart_window_s:
            b.exits.popleft()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
        if len(b.exits) > self.max_restarts:
            self.failure = (
                f"{b.name} {how}: {len(b.exits)} exits within {self.restart_window_s:.0f} s; stopping the node"
            )
            log.error("%s", self.failure)
            b.process = None
            return
        first, cap = self.restart_backoff_s
        delay = min(cap, first * 2 ** (len(b.exits) - 1))
        log.warning(
            "%s %s; restarting it in %.1f s (exit %d within %.0f s)",
            b.name,
            how,
            delay,
            len(b.exits),
            self.restart_window_s,
        )
        b.process = None
        b.restart_at = now + delay


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _free_block(host: str, size: int) -> int:
    """The first port of ``size`` consecutive free ports (base_port=0: tests and embedded use)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((host, 0))
            start = s.getsockname()[1]
        if start + size < 65536 and all(_port_free(host, p) for p in range(start, start + size)):
            return start
    raise NodeError(f"no {size} consecutive free ports on {host}")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the node's process dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
