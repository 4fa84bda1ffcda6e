"""Avro values: schema mapping, round trips, and bad records by mode."""

from __future__ import annotations

import datetime
import json
import pickle

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from connectors.spark.avro import AvroCodec
from spark_replica.errors import ConfigError, CorruptRecordError

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["null", "string"]},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    }
)
ROWS = [
    {
        "id": 1,
        "name": "a",
        "at": datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC),
        "tags": ["x", "y"],
    },
    {"id": 2, "name": None, "at": datetime.datetime(2024, 1, 3, tzinfo=datetime.UTC), "tags": []},
]


def test_the_schema_maps_to_spark_types() -> None:
    codec = AvroCodec(SCHEMA)
    assert isinstance(codec.spark_type, StructType)
    fields = {f.name: f.dataType for f in codec.spark_type.fields}
    assert fields["id"] == LongType() and fields["name"] == StringType()
    assert fields["at"] == TimestampType()
    assert codec.spark_type.fields[0] == StructField("id", LongType())


def test_encode_then_decode_round_trips_with_nulls() -> None:
    codec = AvroCodec(SCHEMA)
    values = pa.array([*ROWS, None], type=codec.arrow_type)
    encoded = codec.encode(values)
    assert encoded.type == pa.binary() and encoded.null_count == 1
    assert codec.decode(encoded).to_pylist() == [*ROWS, None]


def test_a_bad_record_fails_naming_its_offset_or_is_nulled_when_permissive() -> None:
    codec = AvroCodec(SCHEMA)
    good = codec.encode(pa.array(ROWS[:1], type=codec.arrow_type))
    values = pa.array([good[0].as_py(), b"\x01"], type=pa.binary())
    with pytest.raises(CorruptRecordError, match="offset 41"):
        codec.decode(values, offsets=[40, 41])
    assert AvroCodec(SCHEMA, mode="permissive").decode(values).to_pylist() == [ROWS[0], None]


def test_bad_schemas_and_modes_are_refused() -> None:
    with pytest.raises(ConfigError, match="avroSchema"):
        AvroCodec("{not json")
    with pytest.raises(ConfigError, match="only unions of null"):
        AvroCodec(json.dumps({"type": "record", "name": "r", "fields": [
            {"name": "u", "type": ["int", "string"]}
        ]}))  # fmt: skip
    with pytest.raises(ConfigError, match="mode"):
        AvroCodec(SCHEMA, mode="DROPMALFORMED")


def test_a_value_that_does_not_fit_is_refused_on_encode() -> None:
    codec = AvroCodec(json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"}
    ]}))  # fmt: skip
    with pytest.raises(ConfigError, match="row 0"):
        codec.encode(pa.array([{"id": None}], type=codec.arrow_type))


def test_the_codec_pickles_small() -> None:
    codec = AvroCodec(SCHEMA, mode="PERMISSIVE")
    again = pickle.loads(pickle.dumps(codec))
    assert again.mode == "PERMISSIVE" and again.arrow_type == codec.arrow_type
