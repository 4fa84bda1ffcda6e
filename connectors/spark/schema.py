"""The row schema of the source, exactly Spark's Kafka source's, in Spark and Arrow form.

Spark checks the first Arrow batch a reader yields against the Arrow form of the
declared schema, so both are built here from one list and must never drift apart.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
ARROW_HEADERS_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
)


def source_schema(include_headers: bool, value_type: DataType | None = None) -> StructType:
    """Kafka's row schema; `value_type` replaces binary when values are decoded (Avro)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", value_type or BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_source_schema(include_headers: bool, value_type: pa.DataType | None = None) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", value_type or pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", ARROW_HEADERS_TYPE))
    return pa.schema(fields)
