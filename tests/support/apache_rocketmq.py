"""An Apache RocketMQ 4.9.7 name server and broker (org.apache.rocketmq:rocketmq-namesrv / rocketmq-broker from Maven
Central, fetched by compat/apache/build.sh) started as child JVMs for interop tests, and the ``apache_rocketmq``
pytest fixture (module scope) yielding ``(namesrv_addr, broker_addr)``.

Use it from a test module with ``from apache_rocketmq import apache_rocketmq  # noqa: F401`` (tests/conftest.py is
not touched). ``ApacheRocketMQ(workdir).start()`` / ``.stop()`` can also be used directly, and
``python tests/support/apache_rocketmq.py [WORKDIR]`` runs the pair until SIGINT/SIGTERM, printing its addresses.

What it sets up, all under ``workdir``: a RocketMQ home (``conf/logback_namesrv.xml``, ``conf/logback_broker.xml``
writing to ``logs/``), ``namesrv.conf`` and ``broker.conf`` (listen ports picked free on 127.0.0.1, brokerIP1
127.0.0.1, small mapped files, autoCreateTopicEnable, autoCreateSubscriptionGroup and enablePropertyFilter (SQL92)
on, ASYNC_FLUSH, ASYNC_MASTER),
a store directory; the JVMs run with -Xmx512m and the --add-opens Java 17 needs for RocketMQ 4.9's mapped-file
cleaner. The broker listens on ``listenPort`` and also on ``listenPort - 2`` (its VIP channel) and
``listenPort + 1`` (HA), so all three are checked free.

``extra_jvm_opts``: more JVM options for both processes (4.9 reads a few store settings from system properties, e.g.
``-Drocketmq.broker.diskSpaceWarningLevelRatio=0.01``).

A master/slave pair: ``ApacheRocketMQ(dir_a).start()`` (name server + master) and
``ApacheRocketMQ(dir_b, extra_broker_conf={"brokerRole": "SLAVE", "brokerId": "1"}).start_broker_only(ns_addr)``;
the slave learns the master's HA address (``listenPort + 1``) from the name server.

Invariants: ``start()`` returns only once the name server is up and the broker has printed "boot success" (it has
then registered with the name server: BrokerController.start() registers synchronously); on any failure both
processes are stopped and the error carries their logs. ``stop()`` sends SIGTERM (the JVMs' shutdown hooks flush
and close the store), waits, and kills only what overruns. Thread-safety: one thread drives an instance.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Self

import pytest

from support.java_compat import JavaProgramError, build_with, require_java

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APACHE_DIR = os.path.join(ROOT, "compat", "apache")
ROCKETMQ_VERSION = "4.9.7"

SERVER_JVM_OPTS = [
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:MaxDirectMemorySize=512m",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports",
    "java.base/sun.nio.ch=ALL-UNNAMED",
]

LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{20}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""

_server_classpaths: dict[str, str] = {}


def server_classpath(version: str | None = None) -> str:
    """The class path of Apache's server jars: 4.9.7, or ``version`` (e.g. "5.3.3", fetched into
    compat/apache/target-VERSION by ``build.sh VERSION``)."""
    require_java()
    key = version or ""
    if key not in _server_classpaths:
        args = [version] if version else []
        _server_classpaths[key] = build_with(os.path.join(APACHE_DIR, "build.sh"), *args)
    return _server_classpaths[key]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_broker_port() -> int:
    """A port L with L-2, L and L+1 all free (the broker's VIP, main and HA listeners)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 60000)
        if all(_port_free(p) for p in (port - 2, port, port + 1)):
            return port
    raise RuntimeError("no free port triple for the Apache broker")


class ApacheRocketMQ:
    """An Apache RocketMQ name server + broker pair in ``workdir``; see the module docstring."""

    def __init__(
        self,
        workdir: str,
        broker_name: str = "broker-a",
        cluster_name: str = "DefaultCluster",
        extra_broker_conf: dict[str, str] | None = None,
        version: str | None = None,
        extra_jvm_opts: list[str] | None = None,
    ) -> None:
        self.version = version  # None: 4.9.7; else a release fetched by compat/apache/build.sh VERSION
        self.workdir = os.path.abspath(workdir)
        self.home = os.path.join(self.workdir, "home")
        self.store = os.path.join(self.workdir, "store")
        self.logs = os.path.join(self.home, "logs")
        self.broker_name = broker_name
        self.cluster_name = cluster_name
        self.extra_broker_conf = dict(extra_broker_conf or {})
        # e.g. -Drocketmq.broker.diskSpaceWarningLevelRatio=0.01 (4.9 reads some settings from system properties)
        self.extra_jvm_opts = list(extra_jvm_opts or [])
        self.namesrv_port = 0
        self.broker_port = 0
        self.namesrv_proc: subprocess.Popen[bytes] | None = None
        self.broker_proc: subprocess.Popen[bytes] | None = None

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    # --- files -----------------------------------------------------------------------------------------------
    def write_files(self) -> tuple[str, str]:
        os.makedirs(os.path.join(self.home, "conf"), exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        os.makedirs(self.store, exist_ok=True)
        for name in ("namesrv", "broker"):
            with open(os.path.join(self.home, "conf", f"logback_{name}.xml"), "w", encoding="utf-8") as f:
                f.write(LOGBACK.format(log=os.path.join(self.logs, f"{name}.log")))
        ns_conf = os.path.join(self.workdir, "namesrv.conf")
        with open(ns_conf, "w", encoding="utf-8") as f:
            f.write(
                f"listenPort={self.namesrv_port}\n"
                f"rocketmqHome={self.home}\n"
                f"kvConfigPath={self.store}/namesrv/kvConfig.json\n"
                f"configStorePath={self.store}/namesrv/namesrv.properties\n"
            )
        conf = {
            "brokerClusterName": self.cluster_name,
            "brokerName": self.broker_name,
            "brokerId": "0",
            "listenPort": str(self.broker_port),
            "namesrvAddr": self.namesrv_addr,
            "brokerIP1": "127.0.0.1",
            "rocketmqHome": self.home,
            "storePathRootDir": f"{self.store}/broker",
            "storePathCommitLog": f"{self.store}/broker/commitlog",
            "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": str(6000 * 20),
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "flushDiskType": "ASYNC_FLUSH",
            "brokerRole": "ASYNC_MASTER",
            "diskMaxUsedSpaceRatio": "95",
            "enablePropertyFilter": "true",
            **self.extra_broker_conf,
        }
        br_conf = os.path.join(self.workdir, "broker.conf")
        with open(br_conf, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        return ns_conf, br_conf

    # --- lifecycle -------------------------------------------------------------------------------------------
    def _spawn(self, main: str, conf: str, name: str) -> subprocess.Popen[bytes]:
        with open(os.path.join(self.logs, f"{name}.stdout"), "wb") as out:  # the child keeps its own descriptor
            return subprocess.Popen(
                [
                    "java",
                    *SERVER_JVM_OPTS,
                    *self.extra_jvm_opts,
                    f"-Duser.home={self.home}",
                    f"-Drocketmq.home.dir={self.home}",
                    "-cp",
                    server_classpath(self.version),
                    main,
                    "-c",
                    conf,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )

    def _wait_for(self, proc: subprocess.Popen[bytes], name: str, marker: str, timeout: float) -> None:
        path = os.path.join(self.logs, f"{name}.stdout")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(path, encoding="utf-8", errors="replace") as f:
                if marker in f.read():
                    return
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise JavaProgramError(f"Apache {name} did not start (exit {proc.poll()}):\n{self.tail(name)}")

    def tail(self, name: str, n: int = 4000) -> str:
        parts = []
        for suffix in (".stdout", ".log"):
            path = os.path.join(self.logs, name + suffix)
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    parts.append(f"--- {path}\n{f.read()[-n:]}")
        return "\n".join(parts)

    def start(self, timeout: float = 90.0) -> Self:
        self.start_namesrv(timeout)
        self.start_broker(timeout=timeout)
        return self

    def start_namesrv(self, timeout: float = 90.0) -> None:
        """Fetch the jars, pick both ports, write the files, start the name server (the broker comes next)."""
        server_classpath(self.version)
        self.namesrv_port = free_port()
        self.broker_port = free_broker_port()
        ns_conf, _ = self.write_files()
        try:
            self.namesrv_proc = self._spawn("org.apache.rocketmq.namesrv.NamesrvStartup", ns_conf, "namesrv")
            self._wait_for(self.namesrv_proc, "namesrv", "boot success", timeout)
        except BaseException:
            self.stop()
            raise

    def start_broker(self, namesrv_addr: str | None = None, timeout: float = 90.0) -> None:
        """Start the broker; it registers with ``namesrv_addr`` (default: this name server; a proxy's address to
        record the registration)."""
        if namesrv_addr is not None:
            self.extra_broker_conf["namesrvAddr"] = namesrv_addr
        _, br_conf = self.write_files()
        try:
            self.broker_proc = self._spawn("org.apache.rocketmq.broker.BrokerStartup", br_conf, "broker")
            self._wait_for(self.broker_proc, "broker", "boot success", timeout)
        except BaseException:
            self.stop()
            raise

    def start_broker_only(self, namesrv_addr: str, timeout: float = 90.0) -> Self:
        """Start only a broker (no name server of its own) registering with ``namesrv_addr``: the second broker of a
        master/slave pair, e.g. ``extra_broker_conf={"brokerRole": "SLAVE", "brokerId": "1"}`` (replication tests)."""
        server_classpath()
        self.broker_port = free_broker_port()
        self.extra_broker_conf["namesrvAddr"] = namesrv_addr
        self.start_broker(timeout=timeout)
        return self

    @property
    def commit_log_dir(self) -> str:
        return os.path.join(self.store, "broker", "commitlog")

    def stop(self, timeout: float = 30.0) -> None:
        for proc in (self.broker_proc, self.namesrv_proc):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self.broker_proc = self.namesrv_proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="module")
def apache_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """An Apache RocketMQ 4.9.7 name server and broker for the test module: ``(namesrv_addr, broker_addr)``."""
    server = ApacheRocketMQ(str(tmp_path_factory.mktemp("apache-rocketmq")))
    server.start()
    try:
        yield server.namesrv_addr, server.broker_addr
    finally:
        server.stop()


def main() -> None:
    """``python tests/support/apache_rocketmq.py [WORKDIR]``: start the pair, print the addresses, run until SIGINT/SIGTERM."""
    import signal
    import sys
    import tempfile
    import threading

    workdir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="apache-rocketmq-")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ApacheRocketMQ(workdir) as server:
        print(f"namesrv {server.namesrv_addr} broker {server.broker_addr} workdir {workdir}", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
