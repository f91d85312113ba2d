"""A new user's ordinary mistakes, run as ``rmq-core`` processes: each ends in one line on stderr naming what failed
and what to do (the address that did not answer, the topic with no route, the port in use and its flag, the missing
file), exit code 1 (2 for an argument the command refuses), no traceback unless ``--debug``; ``consume`` against an
unreachable name server fails within its timeout, and on SIGTERM prints its summary; ``admin query-by-id`` tells
an offset message id from a client message id (UNIQ_KEY) as mqadmin does."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import Producer
from rmq_core.message import Message
from rmq_core.namesrv import NameServer

from support.admin_helpers import wait_for_route
from support.helpers import subprocess_env

CLI = [sys.executable, "-m", "rmq_core.cli"]
TOPIC = "CliErrorsT"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=subprocess_env(), timeout=timeout)


def one_error_line(r: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The single stderr line of a failed command (argparse's usage lines aside), checked: no traceback."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    info = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ INFO ")  # a server's start-up log lines
    lines = [
        ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith((" ", "usage:")) and not info.match(ln)
    ]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def dead_addr() -> str:
    """An address nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("cli-errors")
    ns = NameServer(listen_port=0).start()
    cfg = BrokerConfig(
        broker_ip1="127.0.0.1",
        listen_port=0,
        namesrv_addr=ns.address,
        store_path_root_dir=str(root / "store"),
        mapped_file_size_commit_log=1024 * 1024,
        mapped_file_size_consume_queue=6000 * 20,
    )
    broker = Broker(cfg).start()
    try:
        wait_for_route(ns.address, "TBW102")
        p = Producer("cli_errors_p", namesrv_addr=ns.address, instance_name="cli-errors")
        p.start()
        try:
            sends = [p.send(Message(TOPIC, f"body-{i}".encode(), tags="TagA", keys=f"k-{i}")) for i in range(3)]
        finally:
            p.shutdown()
        yield {"namesrv": ns.address, "broker": broker.address, "sends": sends}
    finally:
        broker.shutdown()
        ns.shutdown()


def test_unreachable_name_server_is_one_line_naming_it(dead_addr) -> None:
    for args in (
        ["admin", "cluster-list"],
        ["admin", "topic-status", "-t", TOPIC],
        ["admin", "consumer-progress", "-g", "g"],
        ["topic", "list"],
    ):
        line = one_error_line(cli(*args, "-n", dead_addr))
        assert line.startswith(f"error: nothing answers at {dead_addr} (the name server; check -n"), (args, line)
    line = one_error_line(cli("send", TOPIC, "hi", "-n", dead_addr))
    assert "No route info of this topic: CliErrorsT, because name server" in line and dead_addr in line, line


def test_consume_against_an_unreachable_name_server_fails_at_once(dead_addr) -> None:
    started = time.monotonic()
    r = cli("consume", TOPIC, "-n", dead_addr, timeout=30)  # no --timeout: it used to run forever
    assert f"nothing answers at {dead_addr}" in one_error_line(r)
    r = cli("consume", TOPIC, "-n", dead_addr, "--timeout", "10")  # it used to exit 0 after 10 s
    assert f"nothing answers at {dead_addr}" in one_error_line(r)
    assert time.monotonic() - started < 20


def test_bad_arguments_are_one_line(tmp_path) -> None:
    line = one_error_line(cli("send", TOPIC, "hi", "-n", "127.0.0.1"), code=2)
    assert "'127.0.0.1' is not host:port" in line
    line = one_error_line(cli("admin", "cluster-list", "-n", "127.0.0.1:99999"), code=2)
    assert "'127.0.0.1:99999' is not host:port" in line
    line = one_error_line(cli("consume", "Order Topic"))
    assert "Order Topic" in line and "illegal characters" in line
    missing = tmp_path / "missing.conf"
    assert one_error_line(cli("broker", "-c", str(missing))) == f"error: no such file: {missing}"


def test_debug_shows_the_traceback(dead_addr) -> None:
    r = cli("--debug", "topic", "list", "-n", dead_addr)
    assert r.returncode == 1 and "Traceback" in r.stderr and "RemotingConnectError" in r.stderr


def test_port_in_use_names_the_flag(tmp_path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = str(holder.getsockname()[1])
    try:
        store = str(tmp_path / "s")
        line = one_error_line(cli("serve", "--namesrv-port", port, "--port", "0", "--dir", store))
        assert line.startswith(f"error: port {port} is in use, so the name server") and "--namesrv-port" in line
        line = one_error_line(cli("serve", "--namesrv-port", "0", "--port", port, "--dir", store))
        assert line.startswith(f"error: port {port} is in use, so the broker") and "--port" in line
        line = one_error_line(cli("namesrv", "--port", port))
        assert f"port {port} is in use" in line and "--port" in line
    finally:
        holder.close()


def test_topic_without_route_is_one_line(cluster) -> None:
    ns = str(cluster["namesrv"])
    line = one_error_line(cli("admin", "topic-status", "-t", "NoSuchTopic", "-n", ns))
    assert line == (
        f"error: topic NoSuchTopic has no route on name server {ns} (create it: rmq-core topic create NoSuchTopic"
        f" -n {ns})"
    )
    line = one_error_line(cli("consume", "NoSuchTopic", "-n", ns, "--timeout", "5"))
    assert "topic NoSuchTopic has no route" in line


def test_consume_prints_its_summary_on_sigterm(cluster) -> None:
    ns = str(cluster["namesrv"])
    proc = subprocess.Popen(
        [*CLI, "consume", TOPIC, "--from-first", "-g", "cli_errors_sigterm", "-n", ns],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert TOPIC in first and "body-" in first, first
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert re.search(rf"consumed \d+ message\(s\) from {TOPIC} as cli_errors_sigterm", err), err


def test_query_by_id_tells_the_two_ids_apart(cluster) -> None:
    ns = str(cluster["namesrv"])
    s = cluster["sends"][1]  # type: ignore[index]
    r = cli("admin", "query-by-id", s.offset_msg_id, "-n", ns)
    assert r.returncode == 0 and "'body-1'" in r.stdout, r.stderr
    # the msgId send prints first (the UNIQ_KEY): not an offset id (its "port" is pid << 16 | hash), asks for -t
    line = one_error_line(cli("admin", "query-by-id", s.msg_id, "-n", ns), code=2)
    assert line.startswith(f"error: {s.msg_id} is a client message id (UNIQ_KEY") and "needs -t TOPIC" in line
    assert "made on " in line
    r = cli("admin", "query-by-id", s.msg_id, "-t", TOPIC, "-n", ns)
    assert r.returncode == 0 and "'body-1'" in r.stdout, (r.stdout, r.stderr)
    # an offset id of this broker at an offset that holds no record: said, and the UNIQ_KEY way named
    host, port = str(cluster["broker"]).split(":")
    wrong = socket.inet_aton(host).hex().upper() + f"{int(port):08X}" + f"{10**9:016X}"
    line = one_error_line(cli("admin", "query-by-id", wrong, "-n", ns))
    assert f"{host}:{port} has no message at CommitLog offset 1,000,000,000" in line and "needs -t TOPIC" in line
