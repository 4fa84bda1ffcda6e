r"""CDC upserts into a table: the latest row per primary key of a compacted topic.

A change data capture stream keys each change by the row's primary key: an insert or an
update carries the whole row as JSON, a delete is a tombstone (a null value). On a topic
with cleanup.policy=compact the broker's cleaner keeps only the last change per key and
drops tombstones after delete.retention.ms, so the topic itself is the table, and it
stops growing with the number of changes.

A reader cannot tell how far the cleaner got (and a cleaning keeps a producer's last
record even when a later one supersedes it), so it keeps, per key, the change with the
highest offset and drops the key when that change is a tombstone. Every change of a key
sits in one partition (the key picks it), so offsets order the changes of a key. The
result is the same before, during and after a cleaning; the read just gets shorter.

Writes --changes demo changes of a customers table (or none with --changes 0), then
reads the topic into a Parquet table at --output and shows it. Run it from the project's
directory, its virtual environment active:

    source .venv/bin/activate
    replog up --brokers 3
    replog topics create customers --partitions 3 --replication-factor 3 \
        --config cleanup.policy=compact
    PYSPARK_PYTHON="$PWD/.venv/bin/python" spark-submit examples/cdc_upsert.py \
        --bootstrap "$(replog status --get bootstrap)" --topic customers --output customers
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from _connection import add_connection_arguments, connection_options
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

CUSTOMER = StructType(
    [
        StructField("id", LongType()),
        StructField("name", StringType()),
        StructField("city", StringType()),
    ]
)
CITIES = ("Lyon", "Porto", "Turku", "Ghent")

# One change: (primary key, row as a dict, or None for a delete).
Change = tuple[int, dict[str, object] | None]


def demo_changes(count: int, customers: int = 20) -> list[Change]:
    """`count` changes cycling over `customers` ids: every seventh change deletes its
    customer, the others insert or update it, so some deleted ids come back later."""
    changes: list[Change] = []
    for number in range(count):
        customer = number % customers
        if number % 7 == 6:
            changes.append((customer, None))
        else:
            row = {
                "id": customer,
                "name": f"customer-{customer}",
                "city": CITIES[number % len(CITIES)],
            }
            changes.append((customer, row))
    return changes


def write_changes(spark: SparkSession, args: argparse.Namespace, changes: Sequence[Change]) -> None:
    """Produce the changes in order, keyed by primary key, a delete as a null value.

    The changes of a key must reach the topic in the order they happened: repartitioning
    by key puts all of them in one task, sorted by their position in the stream.
    """
    rows = [
        (position, str(customer), None if row is None else json.dumps(row))
        for position, (customer, row) in enumerate(changes)
    ]
    frame = spark.createDataFrame(rows, "position long, key string, value string")
    (
        frame.repartition("key")
        .sortWithinPartitions("position")
        .select("key", "value")
        .write.format("replog")
        .mode("append")
        .options(**connection_options(args))
        .option("topic", args.topic)
        .save()
    )


def latest_rows(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The table the topic holds: per key the change with the highest offset, unless it
    is a delete. failOnDataLoss stays on: the gaps the cleaner leaves are not a loss."""
    changes = (
        spark.read.format("replog")
        .options(**connection_options(args))
        .option("subscribe", args.topic)
        .option("failOnDataLoss", "true")
        .load()
        .select(F.col("key").cast("string").alias("key"), F.col("value").cast("string"), "offset")
    )
    # A struct compares field by field, so the maximum is the change with the highest
    # offset, and it is not null even when that change's value is.
    last = changes.groupBy("key").agg(F.max(F.struct("offset", "value")).alias("last"))
    return (
        last.where(F.col("last.value").isNotNull())
        .select(F.from_json("last.value", CUSTOMER).alias("row"))
        .select("row.*")
    )


def write_table(spark: SparkSession, args: argparse.Namespace) -> int:
    """Replace the Parquet table with the topic's latest rows; return how many it holds."""
    latest_rows(spark, args).write.mode("overwrite").parquet(args.output)
    return spark.read.parquet(args.output).count()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_connection_arguments(parser)
    parser.add_argument("--topic", default="customers", help="a topic with cleanup.policy=compact")
    parser.add_argument("--output", required=True, help="the Parquet table to write")
    parser.add_argument("--changes", type=int, default=100, help="demo changes to write first")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    session = SparkSession.builder.appName("replog-cdc-upsert").getOrCreate()
    if arguments.changes:
        write_changes(session, arguments, demo_changes(arguments.changes))
    rows = write_table(session, arguments)
    session.read.parquet(arguments.output).orderBy("id").show(rows, truncate=False)
    session.stop()
