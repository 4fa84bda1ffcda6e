"""valueFormat=avro: values decoded into a struct on read, encoded from one on write."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from connectors.spark.avro import AvroCodec
from tests.spark.conftest import TopicTools

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "item", "type": "string"},
            {"name": "note", "type": ["null", "string"]},
        ],
    }
)
ORDERS = [{"id": i, "item": f"item-{i % 3}", "note": None if i % 2 else "gift"} for i in range(6)]


def avro_values(rows: list[dict[str, object]]) -> list[bytes]:
    codec = AvroCodec(SCHEMA)
    return codec.encode(pa.array(rows, type=codec.arrow_type)).to_pylist()


def read_avro(spark: SparkSession, servers: str, topic: str, **extra: str):
    reader = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("avroSchema", SCHEMA)
    )
    for name, value in extra.items():
        reader = reader.option(name, value)
    return reader.load()


def write_avro(frame: DataFrame, servers: str, topic: str) -> None:
    (
        frame.write.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("avroSchema", SCHEMA)
        .mode("append")
        .save()
    )


def test_read_decodes_avro_values_into_a_struct(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 1)
    topics.produce(topic_name, [*avro_values(ORDERS), None], partition=0)
    df = read_avro(spark, bootstrap_servers, topic_name)
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,item:string,note:string>"
    rows = df.orderBy("offset").select("offset", "value.*").collect()
    assert [r.asDict() for r in rows[:6]] == [{"offset": i, **o} for i, o in enumerate(ORDERS)]
    assert rows[6]["id"] is None, "a null value stays null"


def test_a_bad_avro_value_fails_naming_its_offset_unless_permissive(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 1)
    topics.produce(topic_name, [*avro_values(ORDERS[:2]), b"\x07not avro"], partition=0)
    with pytest.raises(Exception, match="offset 2"):
        read_avro(spark, bootstrap_servers, topic_name).collect()
    permissive = read_avro(spark, bootstrap_servers, topic_name, mode="PERMISSIVE")
    ids = [r["id"] for r in permissive.orderBy("offset").select("value.id").collect()]
    assert ids == [0, 1, None]


def test_avro_options_are_checked(
    spark: SparkSession, bootstrap_servers: str, topic_name: str
) -> None:
    base = spark.read.format("replog").option("replog.bootstrap.servers", bootstrap_servers)
    with pytest.raises(Exception, match="avroSchema"):
        base.option("subscribe", topic_name).option("valueFormat", "avro").load()
    with pytest.raises(Exception, match="valueFormat"):
        base.option("subscribe", topic_name).option("valueFormat", "protobuf").load()


def test_write_encodes_a_struct_value_and_read_gives_it_back(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 2)
    codec = AvroCodec(SCHEMA)
    frame = spark.createDataFrame(
        [(str(o["id"]), o) for o in ORDERS], f"key string, value {codec.spark_type.simpleString()}"
    )
    write_avro(frame, bootstrap_servers, topic_name)
    rows = read_avro(spark, bootstrap_servers, topic_name).select("value.*").collect()
    assert sorted((r.asDict() for r in rows), key=lambda o: o["id"]) == ORDERS


def test_a_value_column_that_does_not_match_the_schema_is_refused(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 1)
    frame = spark.createDataFrame([("k", "not a struct")], "key string, value string")
    with pytest.raises(Exception, match="column 'value' must match avroSchema"):
        write_avro(frame, bootstrap_servers, topic_name)
