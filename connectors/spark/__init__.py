"""The PySpark data source `format("replog")`: Kafka's schema and options, stronger writes.

Spark finds it through the top-level module `pyspark_replog`, so installing the package
is all a user does. Heavy imports happen inside the readers and writers, so that what
Spark pickles to executors stays small.
"""

from connectors.spark.source import ReplogDataSource

__all__ = ["ReplogDataSource"]
