r"""Streaming ETL from one replog topic to another, exactly once, with a checkpoint.

Reads JSON events ({"user": ..., "amount": ...}) from --source, drops malformed ones and
those with a non-positive amount, rounds the amount and writes the cleaned events to
--sink, keyed by user so that each user's events stay in order in one partition.

Run it against a local cluster from the project's directory, its virtual environment
active:

    source .venv/bin/activate
    replog up --brokers 3
    replog topics create events --partitions 3 --replication-factor 3
    replog topics create events-clean --partitions 3 --replication-factor 3
    printf '{"user":"ann","amount":12.5}\n{"user":"bob","amount":-1}\n' \
        | replog produce events
    PYSPARK_PYTHON="$PWD/.venv/bin/python" spark-submit examples/streaming_etl.py \
        --bootstrap "$(replog status --get bootstrap)" \
        --source events --sink events-clean --checkpoint etl-checkpoint --available-now
    replog consume events-clean --from-beginning --max-records 1

Without --available-now it keeps running, a micro-batch every --interval. Stopped and
started again with the same --checkpoint, it resumes where it stopped and writes no
record twice: the sink's writes are idempotent per micro-batch.
"""

from __future__ import annotations

import argparse

from _connection import add_connection_arguments, connection_options
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

EVENT = StructType([StructField("user", StringType()), StructField("amount", DoubleType())])


def start(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    cluster = connection_options(args)
    raw = (
        spark.readStream.format("replog")
        .options(**cluster)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
    )
    events = raw.select(F.from_json(F.col("value").cast("string"), EVENT).alias("e")).select("e.*")
    cleaned = events.where(F.col("user").isNotNull() & (F.col("amount") > 0)).select(
        F.col("user").alias("key"),
        F.to_json(F.struct("user", F.round("amount", 2).alias("amount"))).alias("value"),
    )
    writer = (
        cleaned.writeStream.format("replog")
        .options(**cluster)
        .option("topic", args.sink)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.interval)
    return writer.start()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_connection_arguments(parser)
    parser.add_argument("--source", default="events")
    parser.add_argument("--sink", default="events-clean")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    parser.add_argument("--available-now", action="store_true", help="read what is there, stop")
    parser.add_argument("--interval", default="5 seconds", help="micro-batch trigger interval")
    return parser.parse_args(argv)


if __name__ == "__main__":
    session = SparkSession.builder.appName("replog-streaming-etl").getOrCreate()
    query = start(session, parse_args())
    query.awaitTermination()
    session.stop()
