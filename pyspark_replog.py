"""Registers `format("replog")`: Spark imports installed `pyspark_*` modules and takes
their `DefaultSource`."""

from connectors.spark.source import ReplogDataSource as DefaultSource

__all__ = ["DefaultSource"]
