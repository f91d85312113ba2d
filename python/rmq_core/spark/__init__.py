"""PySpark data source ``rocketmq`` (docs/SPARK_DESIGN.md): ``register(spark)`` makes
``spark.read/readStream.format("rocketmq")`` and ``df.write/writeStream.format("rocketmq")`` available.

Thread-safety: ``register`` may be called more than once (Spark replaces the registration).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    from rmq_core.spark.source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
