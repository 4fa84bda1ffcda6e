r"""Avro values in and out: write structs as Avro records, read them back as structs.

Writes --count orders as Avro (valueFormat=avro with the schema below) to --topic, then
reads the topic with the same options, so the value column comes back as a struct whose
fields can be selected (value.id, value.item, ...).

Run it from the project's directory, its virtual environment active:

    source .venv/bin/activate
    replog up --brokers 3
    replog topics create orders --partitions 3 --replication-factor 3
    PYSPARK_PYTHON="$PWD/.venv/bin/python" spark-submit examples/avro_round_trip.py \
        --bootstrap "$(replog status --get bootstrap)" --topic orders

A value that is not Avro of this schema fails the read naming its offset; add
.option("mode", "PERMISSIVE") to read such values as null instead.
"""

from __future__ import annotations

import argparse
import json

from _connection import add_connection_arguments, connection_options
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

ORDER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "item", "type": "string"},
            {"name": "quantity", "type": "int"},
            {"name": "note", "type": ["null", "string"]},
        ],
    }
)


def write_orders(spark: SparkSession, args: argparse.Namespace) -> None:
    orders = spark.range(args.count).select(
        F.col("id").cast("string").alias("key"),
        F.struct(
            F.col("id"),
            F.concat(F.lit("item-"), (F.col("id") % 7).cast("string")).alias("item"),
            (F.col("id") % 5 + 1).cast("int").alias("quantity"),
            F.when(F.col("id") % 2 == 0, F.lit("gift")).alias("note"),
        ).alias("value"),
    )
    (
        orders.write.format("replog")
        .options(**connection_options(args))
        .option("topic", args.topic)
        .option("valueFormat", "avro")
        .option("avroSchema", ORDER_SCHEMA)
        .mode("append")
        .save()
    )


def read_orders(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    return (
        spark.read.format("replog")
        .options(**connection_options(args))
        .option("subscribe", args.topic)
        .option("valueFormat", "avro")
        .option("avroSchema", ORDER_SCHEMA)
        .load()
        .select("partition", "offset", "value.*")
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_connection_arguments(parser)
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=1000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    session = SparkSession.builder.appName("replog-avro").getOrCreate()
    arguments = parse_args()
    write_orders(session, arguments)
    read_orders(session, arguments).orderBy("id").show(10)
    session.stop()
