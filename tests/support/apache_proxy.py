"""An Apache RocketMQ 5.x name server and broker with the gRPC proxy in the broker's JVM (local mode, what
``mqbroker --enable-proxy`` starts: ``ProxyStartup -pm local -bc broker.conf``), the control for the 5.x gRPC clients,
and the ``apache_proxy`` pytest fixture (module scope) yielding the started ``ApacheProxy``.

The jars: ``compat/apache/build.sh 5.3.3`` (rocketmq-namesrv, -broker, -tools and, for 5.x, -proxy from Maven Central).
``ApacheProxy(workdir).start()`` writes ``proxy.json`` (rocketMQClusterName, namesrvAddr, grpcServerPort and
remotingListenPort picked free on 127.0.0.1, metrics off, then ``extra_proxy_conf``) beside ApacheRocketMQ's files, starts the name server, then
ProxyStartup, which builds and starts the broker from ``broker.conf`` in the same JVM. ``grpc_endpoint`` is
``127.0.0.1:PORT``; the port serves plaintext and TLS alike (the proxy's default: tlsTestModeEnable, a self-signed
certificate made at start, TlsMode PERMISSIVE), so one instance is the control for both. ``broker_addr`` is the
broker's own remoting port, ``proxy_remoting_addr`` the proxy's remoting front.

Invariants: ``start()`` returns once the proxy printed "rocketmq-proxy startup successfully" (the broker has started
and registered before that); on failure both JVMs are stopped and the error carries their logs. Thread-safety: one
thread drives an instance. ``PYTHONPATH=tests python tests/support/apache_proxy.py [WORKDIR]`` runs it until SIGINT/SIGTERM.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from support.apache_rocketmq import SERVER_JVM_OPTS, ApacheRocketMQ, free_port, server_classpath

APACHE_PROXY_VERSION = "5.3.3"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
PROXY_READY = "rocketmq-proxy startup successfully"


class ApacheProxy(ApacheRocketMQ):
    """An Apache 5.x name server + broker with the gRPC proxy in the broker's JVM; see the module docstring."""

    def __init__(
        self,
        workdir: str,
        version: str = APACHE_PROXY_VERSION,
        extra_proxy_conf: dict[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(workdir, version=version, **kwargs)  # type: ignore[arg-type]
        # ProxyConfig fields, e.g. {"grpcClientConsumerMaxLongPollingTimeoutMillis": 5000}
        self.extra_proxy_conf = dict(extra_proxy_conf or {})
        self.grpc_port = 0
        self.proxy_remoting_port = 0

    def stop(self, timeout: float = 5.0) -> None:
        """As ApacheRocketMQ's, killing what overruns 5 s: the proxy's graceful stop takes ~25 s, and a control's
        store is thrown away."""
        super().stop(timeout)

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def proxy_remoting_addr(self) -> str:
        return f"127.0.0.1:{self.proxy_remoting_port}"

    def write_proxy_conf(self) -> str:
        self.grpc_port = free_port()
        self.proxy_remoting_port = free_port()
        path = os.path.join(self.workdir, "proxy.json")
        conf = {
            "rocketMQClusterName": self.cluster_name,
            "namesrvAddr": self.namesrv_addr,
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.proxy_remoting_port,
            "metricsExporterType": "DISABLE",
            "grpcShutdownTimeSeconds": 1,
            **self.extra_proxy_conf,
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(conf, f, indent=2)
        return path

    def start_broker(self, namesrv_addr: str | None = None, timeout: float = 120.0) -> None:
        """Start ProxyStartup in local mode: the broker (``broker.conf``) and the gRPC proxy in one JVM."""
        if namesrv_addr is not None:
            self.extra_broker_conf["namesrvAddr"] = namesrv_addr
        _, br_conf = self.write_files()
        proxy_conf = self.write_proxy_conf()
        try:
            self.broker_proc = self._spawn_proxy(["-pm", "local", "-bc", br_conf, "-pc", proxy_conf])
            self._wait_for(self.broker_proc, "broker", PROXY_READY, timeout)
        except BaseException:
            self.stop()
            raise

    def _spawn_proxy(self, args: list[str]) -> subprocess.Popen[bytes]:
        with open(os.path.join(self.logs, "broker.stdout"), "wb") as out:  # the child keeps its own descriptor
            return subprocess.Popen(
                [
                    "java",
                    *SERVER_JVM_OPTS,
                    *self.extra_jvm_opts,
                    f"-Duser.home={self.home}",
                    f"-Drocketmq.home.dir={self.home}",
                    f"-DRMQ_PROXY_HOME={self.home}",
                    "-cp",
                    server_classpath(self.version),
                    PROXY_MAIN,
                    *args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )


@pytest.fixture(scope="module")
def apache_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheProxy]:
    """An Apache 5.3.3 name server + broker with the gRPC proxy for the test module (``.grpc_endpoint``)."""
    server = ApacheProxy(str(tmp_path_factory.mktemp("apache-proxy")))
    server.start(timeout=120.0)
    try:
        yield server
    finally:
        server.stop()


def main() -> None:
    """``python tests/support/apache_proxy.py [WORKDIR]``: start it, print the endpoints, run until SIGINT/SIGTERM."""
    import signal
    import sys
    import tempfile
    import threading

    workdir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="apache-proxy-")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ApacheProxy(workdir) as server:
        print(
            f"namesrv {server.namesrv_addr} grpc {server.grpc_endpoint} broker {server.broker_addr} workdir {workdir}",
            flush=True,
        )
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
