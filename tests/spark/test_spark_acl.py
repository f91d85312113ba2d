"""The ``rocketmq`` sink and source against a broker with RocketMQ 4.9's ACL (options ``accessKey``/``secretKey``):
rows written signed and read back signed (with a consumerGroup commit); a read without credentials fails with the
broker's refusal rather than returning nothing."""

from __future__ import annotations

import pytest

from support.acl_helpers import ADMIN, GROUP_A, PLAIN_ACL_YML, TOPIC_A, USER
from support.client_helpers_core import cluster
from support.spark_helpers import read, spark  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


def test_sink_and_source_sign(spark, tmp_path):  # noqa: F811
    (tmp_path / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    acl = {"acl_enable": True, "acl_file": str(tmp_path / "plain_acl.yml")}
    with cluster(tmp_path, **acl) as (ns, _brokers):
        rows = spark.createDataFrame([(f"acl-{i}".encode(),) for i in range(20)], "body binary")
        (
            rows.write.format("rocketmq")
            .option("namesrv", ns.address)
            .option("topic", TOPIC_A)
            .option("accessKey", ADMIN.access_key)
            .option("secretKey", ADMIN.secret_key)
            .mode("append")
            .save()
        )
        got = read(
            spark,
            namesrv=ns.address,
            topic=TOPIC_A,
            consumerGroup=GROUP_A,
            accessKey=USER.access_key,
            secretKey=USER.secret_key,
        ).collect()
        assert sorted(bytes(r["body"]) for r in got) == sorted(f"acl-{i}".encode() for i in range(20))
        with pytest.raises(Exception, match="No accessKey is configured"):
            read(spark, namesrv=ns.address, topic=TOPIC_A).collect()
