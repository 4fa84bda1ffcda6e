"""The PySpark data source `format("replog")`: Kafka's schema and options, stronger writes.

Spark finds it through the top-level module `pyspark_replog`, which imports
`connectors.spark.source`, so installing the package is all a user does. This package
module imports nothing: the CLI reuses pure parts (the offsets codec) without loading
pyspark, and heavy imports happen inside the readers and writers, so that what Spark
pickles to executors stays small.
"""
