"""`ReplogDataSource`: what Spark calls for `format("replog")`.

Each method hands over to the module that does the work; the imports are inside the
methods so that loading the source (which Spark does for every lookup) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from connectors.spark.schema import source_schema

if TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )


class ReplogDataSource(DataSource):
    """Reads and writes replog topics with the schema and options of Spark's Kafka source.

    Examples::

        spark.readStream.format("replog")
            .option("replog.bootstrap.servers", "localhost:9092")
            .option("subscribe", "events")
            .load()

        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        spark.read.format("replog")
            .option("replog.bootstrap.servers", "localhost:9092")
            .option("subscribe", "events")
            .option("filterPushdown", "true")
            .load()
            .where("partition = 1 AND offset >= 1000000")  # reads only those records

        df.write.format("replog")
            .option("replog.bootstrap.servers", "localhost:9092")
            .option("topic", "events")
            .save()
    """

    @classmethod
    def name(cls) -> str:
        return "replog"

    def schema(self) -> StructType:
        from connectors.spark.avro import codec_from_options
        from connectors.spark.source_options import include_headers

        avro = codec_from_options(self.options)
        return source_schema(
            include_headers(self.options), avro.spark_type if avro is not None else None
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        from connectors.spark.batch_reader import PushdownBatchReader, ReplogBatchReader
        from connectors.spark.pushdown import filter_pushdown_enabled

        if filter_pushdown_enabled(self.options):
            return PushdownBatchReader(dict(self.options), schema)
        return ReplogBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from connectors.spark.stream_reader import ReplogStreamReader

        return ReplogStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from connectors.spark.writer import ReplogBatchWriter

        return ReplogBatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from connectors.spark.writer import ReplogStreamWriter

        return ReplogStreamWriter(dict(self.options), schema, overwrite)
