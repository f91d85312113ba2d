"""The README's Spark block runs as written (one Spark session, its own process, as a user runs it) against a
cluster holding OrderTopic: the batch read and its groupBy, the streaming query to parquet, and the batch write to
the Copy topic (``.mode("append")``: Spark's default ErrorIfExists is refused for a Python data source). Only the
name server address is rewritten (to the test cluster's); the fast README test (tests/tools/test_readme.py) runs
every other block."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from rmq_core.client import Producer
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.message import Message

from support.client_helpers_core import cluster
from support.helpers import subprocess_env
from support.readme_snippets import blocks, rewrite

pytestmark = pytest.mark.slow

COUNT = 20


def _copied(namesrv: str) -> int:
    with BlockingMQClientAPI(namesrv) as api:
        route = api.get_topic_route_info_from_name_server("Copy")
        addr = route.broker_datas[0].broker_addrs[0]
        stats = api.get_topic_stats_info(addr, "Copy")
    return sum(o.max_offset - o.min_offset for o in stats.offset_table.values())


def test_readme_spark_block_runs_as_written(tmp_path) -> None:
    [block] = [b for b in blocks("python") if "pyspark" in b.code]
    with cluster(tmp_path / "cluster") as (ns, _brokers):
        p = Producer("readme-spark", namesrv_addr=ns.address, instance_name="readme-spark")
        p.start()
        try:
            for i in range(COUNT):
                p.send(Message("OrderTopic", f"order-{i}".encode(), tags="TagA" if i % 2 else "TagC"))
        finally:
            p.shutdown()
        work = tmp_path / "work"
        work.mkdir()
        script = work / "spark_snippet.py"
        script.write_text(rewrite(block.code, ns.address, 0))
        env = subprocess_env()
        env["PYSPARK_PYTHON"] = sys.executable
        started = time.monotonic()
        r = subprocess.run(
            [sys.executable, script.name], cwd=work, env=env, capture_output=True, text=True, timeout=240,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" not in r.stderr
        # df.groupBy("tags").count().show(): the TagA rows (the filter is "TagA || TagB")
        assert "|TagA|" in r.stdout.replace(" ", "") and "TagC" not in r.stdout, r.stdout
        assert _copied(ns.address) == COUNT // 2  # the TagA rows, written to Copy
        assert (work / "chk").is_dir(), "the streaming query did not start"
        assert time.monotonic() - started < 240
