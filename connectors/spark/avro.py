"""Avro values: `valueFormat=avro` with `avroSchema` (JSON) on read and on write.

Records are Avro's single-object-less binary encoding (schemaless, as Spark's
`from_avro`/`to_avro` use), one value per record. The schema maps onto Spark types as
Spark's Avro support maps them, so a decoded value column is a struct a user selects from
(`value.field`). Avro is decoded record by record with fastavro: unlike the stored Arrow
payload there is no columnar path, so Avro costs per-row Python on purpose.

Bad records either fail the read naming the offset (mode FAILFAST, the default) or
become a null value (mode PERMISSIVE), as Spark's `from_avro` modes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_replica.errors import ConfigError, CorruptRecordError

VALUE_FORMAT = "valueFormat"
AVRO_SCHEMA = "avroSchema"
MODE = "mode"
FAILFAST = "FAILFAST"
PERMISSIVE = "PERMISSIVE"
MODES = (FAILFAST, PERMISSIVE)

_PRIMITIVES: dict[str, tuple[DataType, pa.DataType]] = {
    "boolean": (BooleanType(), pa.bool_()),
    "int": (IntegerType(), pa.int32()),
    "long": (LongType(), pa.int64()),
    "float": (FloatType(), pa.float32()),
    "double": (DoubleType(), pa.float64()),
    "bytes": (BinaryType(), pa.binary()),
    "string": (StringType(), pa.string()),
}
_TIMESTAMP = (TimestampType(), pa.timestamp("us", tz="UTC"))
_LOGICAL: dict[str, tuple[DataType, pa.DataType]] = {
    "timestamp-millis": _TIMESTAMP,
    "timestamp-micros": _TIMESTAMP,
    "date": (DateType(), pa.date32()),
}


class AvroCodec:
    """One parsed schema, with its Spark and Arrow types; pickles as the schema text."""

    def __init__(self, schema_json: str, mode: str = FAILFAST) -> None:
        if mode.upper() not in MODES:
            raise ConfigError(f"mode={mode!r}: use one of {', '.join(MODES)}")
        try:
            self._schema = json.loads(schema_json)
            self._parsed = fastavro.parse_schema(self._schema)
        except (ValueError, fastavro.schema.SchemaParseException) as exc:
            raise ConfigError(f"avroSchema is not a valid Avro schema: {exc}") from exc
        self.schema_json = schema_json
        self.mode = mode.upper()
        self.spark_type, self.arrow_type = _types(self._schema, "avroSchema")

    def __reduce__(self) -> tuple[type[AvroCodec], tuple[str, str]]:
        return AvroCodec, (self.schema_json, self.mode)

    def decode(self, values: pa.Array, offsets: Sequence[int] | None = None) -> pa.Array:
        """Binary Avro values -> an Arrow array of `arrow_type` (null stays null)."""
        decoded: list[Any] = []
        for n, value in enumerate(values.to_pylist()):
            if value is None:
                decoded.append(None)
                continue
            try:
                decoded.append(fastavro.schemaless_reader(io.BytesIO(value), self._parsed))
            except Exception as exc:
                if self.mode == PERMISSIVE:
                    decoded.append(None)
                    continue
                where = f"offset {offsets[n]}" if offsets is not None else f"row {n}"
                raise CorruptRecordError(
                    f"the value at {where} is not Avro of the given avroSchema ({exc!r}); "
                    "set mode=PERMISSIVE to read such values as null"
                ) from exc
        return pa.array(decoded, type=self.arrow_type)

    def encode(self, values: pa.Array) -> pa.Array:
        """An Arrow array of the schema's shape -> binary Avro values (null stays null)."""
        encoded: list[bytes | None] = []
        for n, value in enumerate(values.to_pylist()):
            if value is None:
                encoded.append(None)
                continue
            buffer = io.BytesIO()
            try:
                fastavro.schemaless_writer(buffer, self._parsed, value)
            except Exception as exc:
                raise ConfigError(
                    f"row {n} of the value column does not fit avroSchema: {exc}"
                ) from exc
            encoded.append(buffer.getvalue())
        return pa.array(encoded, type=pa.binary())


def codec_from_options(options: Mapping[str, str]) -> AvroCodec | None:
    """The Avro codec that `valueFormat=avro` with `avroSchema` asks for, else None.

    Shared by the source and the sink, so both spell and check the options alike.
    """
    opts = {k.lower(): v for k, v in options.items()}
    value_format = opts.get(VALUE_FORMAT.lower(), "binary").strip().lower()
    schema = opts.get(AVRO_SCHEMA.lower())
    if value_format == "binary":
        if schema is not None:
            raise ConfigError(f"{AVRO_SCHEMA} is given but {VALUE_FORMAT} is not avro")
        return None
    if value_format != "avro":
        raise ConfigError(f"{VALUE_FORMAT}={value_format!r}: use binary (default) or avro")
    if not schema:
        raise ConfigError(f"{VALUE_FORMAT}=avro needs {AVRO_SCHEMA} (the Avro schema as JSON)")
    return AvroCodec(schema, opts.get(MODE.lower(), FAILFAST))


def _types(schema: Any, where: str) -> tuple[DataType, pa.DataType]:
    """Spark and Arrow types of an Avro schema, refusing what has no Spark equivalent."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        raise ConfigError(f"{where}: Avro type {schema!r} is not supported")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ConfigError(f"{where}: only unions of null and one type are supported")
        return _types(branches[0], where)
    if not isinstance(schema, dict):
        raise ConfigError(f"{where}: {schema!r} is not an Avro schema")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if logical == "decimal":
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        return DecimalType(precision, scale), pa.decimal128(precision, scale)
    if kind == "record":
        spark_fields, arrow_fields = [], []
        for field in schema.get("fields", []):
            spark, arrow = _types(field["type"], f"{where}.{field['name']}")
            spark_fields.append(StructField(field["name"], spark))
            arrow_fields.append(pa.field(field["name"], arrow))
        return StructType(spark_fields), pa.struct(arrow_fields)
    if kind == "array":
        spark, arrow = _types(schema["items"], f"{where}[]")
        return ArrayType(spark), pa.list_(arrow)
    if kind == "map":
        spark, arrow = _types(schema["values"], f"{where}{{}}")
        return MapType(StringType(), spark), pa.map_(pa.string(), arrow)
    if kind == "enum":
        return StringType(), pa.string()
    if kind == "fixed":
        return BinaryType(), pa.binary()
    return _types(kind, where)
