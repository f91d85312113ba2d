"""Running the Java interop harness (compat/java: Apache RocketMQ's Java client 4.9.7 and the JSON-lines programs
Produce, PushConsume, QueryOffset, PullConsume) from tests.

``java_classpath()`` builds the harness once per process (``java_classpath("5.5.0")`` the same programs against
that rocketmq-client, into compat/java/target-5.5.0) (compat/java/build.sh, which itself only runs Maven when a
source changed) and returns the class path. ``run_java(main, args)`` runs a program to completion and returns its
JSON lines; ``JavaProgram`` runs one in the background and hands its lines over as they come (so a test can act
when a consumer is ready). The client's own logs go to files under ``log_dir`` (never stdout).

Invariants: every process started here is waited for (and killed if it overruns its timeout) and its pipes closed;
a program that exits non-zero or prints a non-JSON line raises ``JavaProgramError`` with its stderr.
Thread-safety: a ``JavaProgram`` is used from one test thread; its reader thread only appends to a queue.
Set ``RMQ_COMPAT_JAVA=0`` to skip (explicitly) the tests that need Java and Maven.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any, Self

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAVA_DIR = os.path.join(ROOT, "compat", "java")
PKG = "org.rmqcore.compat."

# Java 17 + RocketMQ 4.9: the client needs no --add-opens (netty 4.1.65 falls back without sun.misc.Unsafe tricks);
# the flags below only keep the JVM small and quick to start and the client's logs out of the user's home.
CLIENT_JVM_OPTS = [
    "-Xmx256m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Drocketmq.client.logLevel=INFO",
    "-Drocketmq.client.logUseSlf4j=false",
]

_classpath: str | None = None
_classpaths: dict[str, str] = {}  # other client versions
_classpath_lock = threading.Lock()


class JavaProgramError(AssertionError):
    """A harness program failed (non-zero exit, timeout, or output that is not JSON lines)."""


def require_java() -> None:
    if os.environ.get("RMQ_COMPAT_JAVA") == "0":
        pytest.skip("RMQ_COMPAT_JAVA=0: Java interop tests switched off explicitly")
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise JavaProgramError(
                f"{tool} is not on PATH: the Java interop tests need JDK 17 and Maven 3.8 "
                "(or set RMQ_COMPAT_JAVA=0 to skip them)"
            )


def build_with(script: str, *args: str) -> str:
    """Run a compat build script (no stdin) and return the class path it prints last."""
    proc = subprocess.run(
        [script, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900, check=False
    )
    if proc.returncode != 0:
        raise JavaProgramError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        raise JavaProgramError(f"{script} printed no class path")
    return lines[-1].strip()


def java_classpath(client_version: str | None = None) -> str:
    """The harness built against rocketmq-client 4.9.7, or ``client_version`` (e.g. "5.5.0", built into
    compat/java/target-<version>)."""
    global _classpath
    require_java()
    with _classpath_lock:
        if client_version is not None:
            if client_version not in _classpaths:
                _classpaths[client_version] = build_with(os.path.join(JAVA_DIR, "build.sh"), client_version)
            return _classpaths[client_version]
        if _classpath is None:
            _classpath = build_with(os.path.join(JAVA_DIR, "build.sh"))
        return _classpath


def java_command(main: str, args: Sequence[object], log_dir: str, client_version: str | None = None) -> list[str]:
    os.makedirs(log_dir, exist_ok=True)
    return [
        "java",
        *CLIENT_JVM_OPTS,
        f"-Drocketmq.client.logRoot={log_dir}",
        f"-Duser.home={log_dir}",
        "-cp",
        java_classpath(client_version),
        PKG + main,
        *[str(a) for a in args],
    ]


def parse_lines(main: str, stdout: str, stderr: str) -> list[dict[str, Any]]:
    out = []
    for ln in stdout.splitlines():
        if not ln.strip():
            continue
        try:
            out.append(json.loads(ln))
        except ValueError:
            raise JavaProgramError(f"{main} printed a non-JSON line {ln!r}\nstderr:\n{stderr[-4000:]}") from None
    return out


def run_java(
    main: str, args: Sequence[object], log_dir: str, timeout: float = 60.0, client_version: str | None = None
) -> list[dict[str, Any]]:
    """Run ``org.rmqcore.compat.<main>`` (built against rocketmq-client ``client_version``, default 4.9.7) to
    completion; its JSON lines. Errors (exit != 0) raise."""
    cmd = java_command(main, args, log_dir, client_version)
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise JavaProgramError(f"{main} did not finish in {timeout} s; stdout so far:\n{e.stdout!r}") from None
    lines = parse_lines(main, proc.stdout, proc.stderr)
    if proc.returncode != 0:
        raise JavaProgramError(
            f"{main} exited {proc.returncode}:\n{proc.stdout[-6000:]}\nstderr:\n"
            f"{proc.stderr[-4000:]}\nclient log: {log_dir}/rocketmq_client.log"
        )
    return lines


class JavaProgram:
    """A harness program running in the background; ``next_event(name)`` waits for its next line of that event."""

    def __init__(self, main: str, args: Sequence[object], log_dir: str) -> None:
        self.main = main
        self.log_dir = log_dir
        self.lines: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._proc = subprocess.Popen(
            java_command(main, args, log_dir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"java-{main}-stdout", daemon=True)
        self._err_reader = threading.Thread(target=self._read_err, name=f"java-{main}-stderr", daemon=True)
        self._reader.start()
        self._err_reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for ln in self._proc.stdout:
            if ln.strip():
                try:
                    self._queue.put(json.loads(ln))
                except ValueError:
                    self._queue.put({"event": "non-json", "line": ln})
        self._queue.put(None)

    def _read_err(self) -> None:
        assert self._proc.stderr is not None
        for ln in self._proc.stderr:
            self._stderr.append(ln)

    def next_event(self, event: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise JavaProgramError(f"{self.main}: no {event!r} line within {timeout} s; lines: {self.lines}")
            try:
                rec = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if rec is None:
                self._queue.put(None)  # keep the end marker for later calls
                raise JavaProgramError(
                    f"{self.main} ended before a {event!r} line; lines: {self.lines}\nstderr:\n"
                    f"{''.join(self._stderr)[-4000:]}"
                )
            self.lines.append(rec)
            if rec.get("event") == "error":
                raise JavaProgramError(f"{self.main} reported an error: {rec.get('trace') or rec}")
            if rec.get("event") == event:
                return rec

    def wait(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait for the program to exit; all its lines. Raises if it failed or overran."""
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise JavaProgramError(f"{self.main} did not exit within {timeout} s; lines: {self.lines}") from None
        self._reader.join(10)
        self._err_reader.join(10)
        self._close_pipes()
        while True:
            rec = self._queue.get_nowait() if not self._queue.empty() else None
            if rec is None:
                break
            self.lines.append(rec)
        bad = [r for r in self.lines if r.get("event") in ("error", "non-json")]
        if code != 0 or bad:
            raise JavaProgramError(
                f"{self.main} exited {code}: {bad or self.lines[-3:]}\nstderr:\n"
                f"{''.join(self._stderr)[-4000:]}\nclient log: {self.log_dir}/rocketmq_client.log"
            )
        return self.lines

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)
        self._reader.join(10)
        self._err_reader.join(10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for p in (self._proc.stdout, self._proc.stderr):
            if p is not None and not p.closed:
                p.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
