"""Smoke tests of the main job, ``rmq-core pipeline`` (rmq_core.pipeline), run as a subprocess the way ./dev demo
runs it: a node (a name server in-process, broker processes) over a store directory under tmp_path, a producer, a
push consumer group of two, and (when PySpark, Java and the ``rocketmq`` data source are there) the Spark streaming and batch
queries. Each test asserts the exit status and the report's lines.

Thread-safety: not applicable (each test runs its own process).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def run_pipeline(tmp_path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "rmq_core.cli",
        "pipeline",
        "--dir",
        str(tmp_path / "store"),
        "--commit-log-file-mb",
        "16",
        *args,
    ]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=str(tmp_path))


def _spark_ready() -> str | None:
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
        return "pyspark/pyarrow not installed"
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        return "no Java"
    try:
        from rmq_core.spark import register  # noqa: F401
    except ImportError:
        return "the rocketmq data source (rmq_core.spark.register) is not there"
    return None


def test_pipeline_without_spark_consumes_every_message_once(tmp_path) -> None:
    r = run_pipeline(tmp_path, "--messages", "3000", "--no-spark")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "produced   3,000 messages" in out
    assert "consumed   3,000 messages" in out
    assert "[ok] duplicates = 0" in out
    assert "[ok] both consumers consumed" in out
    assert "[skipped] Spark queries: --no-spark" in out
    assert "ok: every check agrees" in out
    split = re.search(
        r"split +consumer-1=([\d,]+) \(pipeline-0 \[([\d, ]+)\]\), consumer-2=([\d,]+) \(pipeline-0 \[([\d, ]+)\]\)",
        out,
    )
    assert split, out  # on 2 cores --brokers auto is one broker: pipeline-0
    c1, q1, c2, q2 = split.groups()
    assert int(c1.replace(",", "")) + int(c2.replace(",", "")) == 3000
    assert sorted(int(q) for q in (q1 + "," + q2).split(",")) == list(range(8))  # 8 queues, shared, disjoint
    assert re.search(r"per broker pipeline-0: produced 3,000 \([\d,]+ msg/s\), consumed 3,000 \([\d,]+ msg/s\)", out)
    assert re.search(r"cpu +produce \+ consume: job process .* [\d.]+ cores, pipeline-0 [\d.]+ over", out)
    produced = re.search(r"produced +per tag: (.*)", out)
    consumed = re.search(r"consumed +per tag: (.*)", out)
    assert produced and consumed and produced.group(1) == consumed.group(1)
    assert re.search(r"latency +born → consumed p50 \d+ ms, p99 \d+ ms", out)
    assert os.path.isdir(tmp_path / "store" / "pipeline-0" / "commitlog")


def test_pipeline_on_a_node_of_two_spreads_the_topic_over_both_brokers(tmp_path) -> None:
    r = run_pipeline(tmp_path, "--messages", "4000", "--no-spark", "--brokers", "2", "--queues", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "a node of 2 broker(s) (--brokers 2)" in out
    per_broker = re.search(
        r"per broker pipeline-0: produced ([\d,]+) .*, consumed ([\d,]+) .*; "
        r"pipeline-1: produced ([\d,]+) .*, consumed ([\d,]+) ",
        out,
    )
    assert per_broker, out
    p0, c0, p1, c1 = (int(x.replace(",", "")) for x in per_broker.groups())
    assert p0 == c0 > 0 and p1 == c1 > 0 and p0 + p1 == 4000  # each broker got a share, all consumed
    held = re.findall(r"(pipeline-\d) \[([\d, ]+)\]", out.split("split", 1)[1].splitlines()[0])
    queues = sorted((b, int(q)) for b, qs in held for q in qs.split(","))
    assert queues == [(b, q) for b in ("pipeline-0", "pipeline-1") for q in range(4)], out  # 8 queues, disjoint
    assert "[ok] the group consumed every message: 4,000 of 4,000" in out and "ok: every check agrees" in out
    for b in ("pipeline-0", "pipeline-1"):
        assert os.path.isdir(tmp_path / "store" / b / "commitlog")
    assert "[pipeline-0] rmq-core broker: " in (tmp_path / "store" / "node.log").read_text()


def test_pipeline_without_java_warns_and_skips_spark(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.path.dirname(sys.executable)  # this interpreter's bin directory: no java on the PATH
    cmd = [
        sys.executable,
        "-m",
        "rmq_core.cli",
        "pipeline",
        "--dir",
        str(tmp_path / "store"),
        "--commit-log-file-mb",
        "16",
        "--messages",
        "1000",
    ]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning: skipping the Spark queries: Java is missing" in r.stderr
    assert "[skipped] Spark queries: Java is missing" in r.stdout
    assert "consumed   1,000 messages" in r.stdout and "ok: every check agrees" in r.stdout


def test_pipeline_rejects_bad_options_with_a_clear_error(tmp_path) -> None:
    r = run_pipeline(tmp_path, "--messages", "0", "--no-spark", timeout=60)
    assert r.returncode == 2
    assert "--messages must be positive" in r.stderr
    assert not os.path.exists(tmp_path / "store")  # nothing started, nothing written
    for bad in ("0", "two"):
        r = run_pipeline(tmp_path, "--brokers", bad, "--no-spark", timeout=60)
        assert r.returncode == 2
        assert "--brokers must be" in r.stderr
        assert not os.path.exists(tmp_path / "store")


def test_pipeline_against_an_unreachable_name_server_fails_clearly(tmp_path) -> None:
    r = run_pipeline(tmp_path, "--messages", "100", "--no-spark", "--namesrv", "127.0.0.1:1", timeout=120)
    assert r.returncode == 1
    assert "error: the pipeline failed" in r.stderr


def test_pipeline_against_an_existing_cluster(tmp_path) -> None:
    """--namesrv: a name server + broker in another process (rmq-core serve); the job starts no broker of its own,
    creates its topic on the cluster's master and consumes every message once."""
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=16777216\nmappedFileSizeConsumeQueue=60000\n")
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rmq_core.cli",
            "serve",
            "--namesrv-port",
            "0",
            "--port",
            "0",
            "--dir",
            str(tmp_path / "cluster"),
            "--name",
            "ext-broker",
            "-c",
            str(conf),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        m = re.search(r"name server (\S+:\d+)", line)
        assert m, line
        r = run_pipeline(tmp_path, "--messages", "2000", "--no-spark", "--namesrv", m.group(1))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "existing cluster, name server " + m.group(1) in r.stdout
        assert "consumed   2,000 messages" in r.stdout and "[ok] duplicates = 0" in r.stdout
        assert not os.path.exists(tmp_path / "store")  # no in-process broker, no local store
    finally:
        serve.terminate()
        serve.communicate(timeout=30)


@pytest.mark.skipif(_spark_ready() is not None, reason=str(_spark_ready()))
def test_pipeline_with_spark_counts_agree(tmp_path) -> None:
    r = run_pipeline(tmp_path, "--messages", "3000", "--fresh", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    produced = re.search(r"produced +per tag: (.*)", out)
    streaming = re.search(r"spark streaming +per tag: (.*)", out)
    batch = re.search(r"spark batch +per tag: (.*)", out)
    assert produced and streaming and batch, out
    assert produced.group(1) == streaming.group(1) == batch.group(1)
    assert "[ok] spark streaming per-tag counts and body bytes equal what was produced" in out
    assert "[ok] spark batch per-tag counts and body bytes equal what was produced" in out
    assert "ok: every check agrees" in out
