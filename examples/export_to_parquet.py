r"""Batch export of a replog topic to Parquet, one folder per partition of the topic.

Reads every record between --starting-offsets and --ending-offsets (Kafka's option
values: "earliest", "latest" or per-partition JSON) and writes key and value as strings
with their offsets and timestamps, so the export can be checked against the topic.

Run it from the project's directory, its virtual environment active:

    source .venv/bin/activate
    replog up --brokers 3
    replog topics create events --partitions 3 --replication-factor 3
    printf 'a:1\nb:2\n' | replog produce events --key-separator :
    PYSPARK_PYTHON="$PWD/.venv/bin/python" spark-submit examples/export_to_parquet.py \
        --zookeeper "$(replog status --get zookeeper)" --topic events --output events-parquet
"""

from __future__ import annotations

import argparse

from _connection import add_connection_arguments, connection_options
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def export(spark: SparkSession, args: argparse.Namespace) -> int:
    """Write the export; return how many records it holds."""
    records = (
        spark.read.format("replog")
        .options(**connection_options(args))
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("endingOffsets", args.ending_offsets)
        .load()
        .select(
            F.col("key").cast("string").alias("key"),
            F.col("value").cast("string").alias("value"),
            "partition",
            "offset",
            "timestamp",
        )
    )
    records.write.mode("overwrite").partitionBy("partition").parquet(args.output)
    return spark.read.parquet(args.output).count()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_connection_arguments(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="the Parquet folder to write")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--ending-offsets", default="latest")
    return parser.parse_args(argv)


if __name__ == "__main__":
    session = SparkSession.builder.appName("replog-export-parquet").getOrCreate()
    count = export(session, parse_args())
    print(f"exported {count} records")
    session.stop()
