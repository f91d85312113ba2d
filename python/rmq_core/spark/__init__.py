"""PySpark data source `rocketmq` (docs/SPARK_DESIGN.md)."""
