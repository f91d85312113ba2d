"""Every command and snippet of README.md runs as written, so the README cannot rot: its ``sh`` blocks' ``rmq-core``
lines (servers started, checked to answer and stopped with SIGTERM; ``consume`` without ``--count`` stopped the same
way after its first message) and its ``python`` blocks, in README order, against a name server and broker that
``rmq-core serve`` started as the README says, in one working directory. Rewritten, and only that: the documented
ports (9876, 10911) to free ones (the offset message id embeds the broker's port, so it follows), ``NAMESRV_ADDR`` for
the lines without ``-n``, and small store files (``-c``) for the servers. Not run here: the ``./dev`` lines (the set-up
that runs this suite) and the Spark block (a JVM start: tests/spark/test_readme_spark.py runs it)."""

from __future__ import annotations

import importlib.metadata
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.helpers import subprocess_env
from support.readme_snippets import BROKER_PORT, Block, as_cli, blocks, free_port, rewrite, shell_commands

# the servers' stores: small files instead of the 1 GiB CommitLog and 400 MB index of the defaults
SMALL_CONF = (
    "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=60000\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n"
)


class Proc:
    """A command run in the background; its stdout lines read on a thread."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.argv = argv
        self.p = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.out.append(line)
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.p.poll() is not None:
                    break
                continue
            if text in line:
                return line
        self.p.kill()
        _, err = self.p.communicate(timeout=10)
        pytest.fail(f"{self.argv[3:]} did not print {text!r}: {''.join(self.out)[-2000:]}\n{err[-3000:]}")

    def stop(self) -> tuple[int, str]:
        self.p.send_signal(signal.SIGTERM)
        try:
            _, err = self.p.communicate(timeout=30)
        finally:
            if self.p.poll() is None:
                self.p.kill()
        return self.p.returncode, err


def _run(argv: list[str], cwd: Path, env: dict[str, str], what: str, timeout: float = 60) -> str:
    r = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    assert r.returncode == 0, f"{what} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr and "WARNING" not in r.stderr, f"{what}:\n{r.stderr[-3000:]}"
    return r.stdout


def _plugin_args() -> list[str]:
    """``-p rmq_core.testing.plugin`` when rmq_core is not installed (its pytest11 entry point is then missing)."""
    names = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    return [] if "rmq_core.testing.plugin" in names else ["-p", "rmq_core.testing.plugin"]


def test_readme_runs_as_written(tmp_path: Path) -> None:
    work = tmp_path / "work"  # the user's directory: serve's ./rmq-store, the snippets' stores, test_orders.py
    work.mkdir()
    (work / "small.conf").write_text(SMALL_CONF)
    ns_port, broker_port = free_port(), free_port((0, 1))  # the broker's HA port is the next one
    namesrv = f"127.0.0.1:{ns_port}"
    env = subprocess_env()
    env["NAMESRV_ADDR"] = namesrv  # for the admin lines without -n (their default: $NAMESRV_ADDR, else :9876)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    main: Proc | None = None
    others: list[Proc] = []
    ran: list[str] = []
    try:
        for block in blocks("sh"):
            for words in shell_commands(block):
                if words[0] == "./dev":
                    continue  # the set-up: ./dev test runs this suite
                argv = as_cli([rewrite(w, namesrv, broker_port) for w in words])
                assert argv is not None, f"README line {block.line}: {' '.join(words)} is not an rmq-core command"
                what = " ".join(words)
                ran.append(what)
                cmd = argv[3]
                if cmd == "serve" and "--brokers" in argv:
                    node_dir = tmp_path / "node"
                    node_dir.mkdir()
                    (node_dir / "small.conf").write_text(SMALL_CONF)
                    p = Proc(
                        [*argv, "--namesrv-port", str(free_port()), "--port", str(free_port((0, 1, 4, 5))),
                         "-c", "small.conf"],
                        node_dir,
                        env,
                    )  # fmt: skip
                    head = p.wait_for("rmq-core serve: name server")
                    n = int(head.split(" brokers:")[0].rsplit(" ", 1)[1])  # "..., N brokers:"
                    assert n >= 1, head  # auto: one per core
                    for _ in range(n):
                        p.wait_for("HA port")
                    time.sleep(0.5)
                    rc, err = p.stop()
                    assert rc == 0, (what, err[-3000:])
                elif cmd == "serve":
                    main = Proc(
                        [*argv, "--namesrv-port", str(ns_port), "--port", str(broker_port), "-c", "small.conf"],
                        work,
                        env,
                    )
                    line = main.wait_for("rmq-core serve: name server")
                    assert namesrv in line and f"127.0.0.1:{broker_port}" in line and "rmq-store" in line, line
                elif cmd == "namesrv":
                    pair_ns = free_port()
                    pair_dir = tmp_path / "pair"
                    pair_dir.mkdir()
                    argv = [a.replace(str(9876), str(pair_ns)) for a in argv]
                    others.append(Proc(argv, pair_dir, env))
                    others[-1].wait_for("listening on")
                elif cmd == "broker":
                    pair_dir = tmp_path / "pair"  # the user's broker.conf, beside the namesrv line's name server
                    (pair_dir / "broker.conf").write_text(
                        f"brokerName=broker-b\nlistenPort=0\nstorePathRootDir={pair_dir / 'store'}\n" + SMALL_CONF
                    )
                    argv = [a.replace(namesrv, f"127.0.0.1:{pair_ns}") for a in argv]
                    b = Proc(argv, pair_dir, env)
                    line = b.wait_for("rmq-core broker: broker-b@")
                    assert f"namesrv=127.0.0.1:{pair_ns}" in line, line
                    assert b.stop()[0] == 0, what
                    for p in others:
                        assert p.stop()[0] == 0
                    others.clear()
                elif cmd == "consume" and "--count" not in argv:
                    p = Proc(argv, work, env)
                    p.wait_for("OrderTopic ")
                    rc, err = p.stop()
                    assert rc == 0 and "consumed " in err and "Traceback" not in err, (what, rc, err[-2000:])
                else:
                    out = _run(argv, work, env, what)
                    _check_output(cmd, argv, out, what)
        assert main is not None, "the README starts no `rmq-core serve`"
        for block in blocks("python"):
            code = rewrite(block.code, namesrv, broker_port)
            if "pyspark" in code:
                continue  # tests/spark/test_readme_spark.py
            ran.append(f"python block at README line {block.line}")
            first = code.splitlines()[0]
            if first.startswith("# test_orders.py"):
                (work / "test_orders.py").write_text(code)
                out = _run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(), "test_orders.py"],
                    work,
                    env,
                    "the pytest snippet",
                    timeout=120,
                )
                assert "2 passed" in out, out
                continue
            script = work / f"snippet_{block.line}.py"
            script.write_text(code)
            r = subprocess.run(
                [sys.executable, script.name], cwd=work, env=env, capture_output=True, text=True, timeout=90,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            assert r.returncode == 0, f"README line {block.line}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
            assert r.stderr == "", f"README line {block.line} logged:\n{r.stderr[-3000:]}"  # nothing on first use
            _check_snippet(code, r.stdout, block)
    finally:
        for p in [*others, *([main] if main else [])]:
            if p.p.poll() is None:
                p.stop()
    assert main is not None and main.p.returncode == 0
    assert sum(w.startswith(".venv/bin/rmq-core admin") for w in ran) == 7, ran  # the ACL section's one too


def _check_output(cmd: str, argv: list[str], out: str, what: str) -> None:
    """What a line printed says it did what the README says."""
    if cmd == "topic" and argv[4] == "create":
        assert out.startswith("created OrderTopic"), (what, out)
    elif cmd == "topic":
        assert "OrderTopic" in out.split(), (what, out)
    elif cmd == "send":
        assert out.startswith("SEND_OK msgId="), (what, out)
    elif cmd == "consume":
        assert out.startswith("OrderTopic ") and "body='hello'" in out, (what, out)
    elif cmd == "admin" and argv[4] in ("query-by-id", "query-by-key"):
        assert "order-42" in out, (what, out)  # the first message of the store: the send line's
    elif cmd == "admin":
        assert out.strip(), what


def _check_snippet(code: str, out: str, block: Block) -> None:
    if "producer.send(" in code and "async" not in code:
        assert out.startswith("SEND_OK "), (block.line, out)
    elif "MessageStore(" in code:
        assert out.startswith("PUT_OK 0 0 "), (block.line, out)
    elif "NameServer(" in code:
        assert out.count("127.0.0.1:") == 2, (block.line, out)


def test_readme_offset_id_is_the_documented_broker() -> None:
    """The README's example offset message id decodes to the documented broker (127.0.0.1:10911)."""
    from rmq_core.message import decode_offset_msg_id

    from support.readme_snippets import README_OFFSET_ID

    text = Path(os.path.dirname(__file__)).parents[1].joinpath("README.md").read_text(encoding="utf-8")
    assert README_OFFSET_ID in text
    assert decode_offset_msg_id(README_OFFSET_ID) == (("127.0.0.1", BROKER_PORT), 0)
