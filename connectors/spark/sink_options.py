"""Options and input schema of the sink, checked on the driver before any task runs.

The sink takes what Spark's Kafka sink takes, so that a pipeline moves over by changing
the format name and the connection option:

- input columns `value` (binary or string, required), `key` (binary or string), `topic`
  (string), `partition` (int) and `headers` (array<struct<key: string, value: binary>>);
  any other column is ignored, as Kafka's sink ignores it;
- the `topic` option, which overrides the `topic` column;
- producer settings under `replog.` names, with the `kafka.` names of Kafka's producer
  accepted as aliases. Other `kafka.`-prefixed producer settings (linger.ms,
  compression.type, ...) mean nothing here and are ignored with a warning, so Kafka
  pipelines run unchanged; an unknown `replog.` option is a typo and fails;
- security settings under either prefix (`kafka.security.protocol`,
  `kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`, ...), read by
  spark_replica.security.settings: one that replog does not support fails by name, since
  ignoring it would send in plaintext what the pipeline meant to secure.

replog's own: `transactional` (true or false, the default) makes a streaming query's
micro-batches visible to read_committed readers whole or not at all, under the
transactional id `transactional.id`, or one derived from `checkpointLocation`
(`sink_transactional_id`; docs/spark-sink.md).

Kafka's settings kept: acks, batch.size (bytes of record data per batch),
compression.type (none, lz4, zstd), max.in.flight.requests.per.connection (per
partition here), request.timeout.ms, delivery.timeout.ms, retry.backoff.ms,
buffer.memory and transaction.timeout.ms; replog adds batch.max.records.

Spark lower-cases option keys, so every lookup here uses lower-case names. Everything
in this module except `parse_sink_options` (which may ask ZooKeeper where the brokers
are) is pure, so it is unit tested without Spark or a cluster.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from connectors.spark.avro import AvroCodec, codec_from_options
from connectors.spark.connection import (
    BOOTSTRAP_OPTION,
    KAFKA_BOOTSTRAP_OPTION,
    ZOOKEEPER_OPTION,
    bootstrap_servers,
)
from spark_replica.client import ACKS_ALL, ProducerConfig, parse_acks
from spark_replica.errors import ConfigError, InvalidTopicError
from spark_replica.records import parse_compression
from spark_replica.security.settings import SecurityConfig, is_security_setting
from spark_replica.topics import validate_topic_name

log = logging.getLogger(__name__)

TOPIC_OPTION = "topic"
TRANSACTIONAL_OPTION = "transactional"
TRANSACTIONAL_ID_OPTION = "transactional.id"
CHECKPOINT_OPTION = "checkpointlocation"  # Spark's checkpointLocation, lower-cased
SINK_TRANSACTIONAL_ID_PREFIX = "replog-sink-"
_BOOLEANS = {"true": True, "false": False}
REPLOG_PREFIX = "replog."
KAFKA_PREFIX = "kafka."

# Producer settings: the name after the prefix (replog. or kafka.) -> its default.
ACKS = "acks"
BATCH_SIZE = "batch.size"
BATCH_MAX_RECORDS = "batch.max.records"
BUFFER_MEMORY = "buffer.memory"
REQUEST_TIMEOUT_MS = "request.timeout.ms"
DELIVERY_TIMEOUT_MS = "delivery.timeout.ms"
RETRY_BACKOFF_MS = "retry.backoff.ms"
COMPRESSION_TYPE = "compression.type"
MAX_IN_FLIGHT = "max.in.flight.requests.per.connection"
TRANSACTION_TIMEOUT_MS = "transaction.timeout.ms"
MAX_IDEMPOTENT_IN_FLIGHT = 5

_INTEGER_SETTINGS = (
    BATCH_SIZE,
    BATCH_MAX_RECORDS,
    BUFFER_MEMORY,
    REQUEST_TIMEOUT_MS,
    DELIVERY_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
    MAX_IN_FLIGHT,
    TRANSACTION_TIMEOUT_MS,
)
# Only this one may be zero.
_MAY_BE_ZERO = {RETRY_BACKOFF_MS}
PRODUCER_SETTINGS = (ACKS, COMPRESSION_TYPE, *_INTEGER_SETTINGS)

_CONNECTION_OPTIONS = {BOOTSTRAP_OPTION, KAFKA_BOOTSTRAP_OPTION, ZOOKEEPER_OPTION}
KNOWN_REPLOG_OPTIONS = frozenset(
    {BOOTSTRAP_OPTION, ZOOKEEPER_OPTION} | {REPLOG_PREFIX + name for name in PRODUCER_SETTINGS}
)

# Kafka's sink would hand these to Kafka's producer; they have no meaning here.
_IGNORED_KAFKA_NOTE = "has no meaning for replog and is ignored"


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """The producer settings of one sink: plain values, so they pickle small."""

    acks: int = ACKS_ALL
    batch_size: int = 1024 * 1024  # bytes of record data per batch
    batch_max_records: int = 10_000
    buffer_memory: int = 32 * 1024 * 1024  # bytes of batches sent but not yet acknowledged
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    compression_type: str = "none"
    max_in_flight_requests_per_connection: int = MAX_IDEMPOTENT_IN_FLIGHT  # per partition
    # How long a micro-batch's transaction may stay open (transactional=true) before
    # the coordinator aborts it.
    transaction_timeout_ms: int = 60_000

    def producer_config(self) -> ProducerConfig:
        """The client's config: idempotent exactly when acks=all, the client's default."""
        return ProducerConfig(
            acks=self.acks,
            request_timeout_ms=self.request_timeout_ms,
            delivery_timeout_ms=self.delivery_timeout_ms,
            retry_backoff_ms=self.retry_backoff_ms,
            batch_records=self.batch_max_records,
            batch_size=self.batch_size,
            compression=self.compression_type,
            max_in_flight_per_partition=self.max_in_flight_requests_per_connection,
        )


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Which of the optional input columns the sink uses."""

    key: bool
    topic: bool  # False when the topic option is set: the option overrides the column
    partition: bool
    headers: bool


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Everything a write task needs to know, resolved on the driver."""

    servers: str
    topic: str | None
    columns: SinkColumns
    producer: ProducerSettings
    avro: AvroCodec | None = None  # encodes a struct value column when valueFormat=avro
    security: SecurityConfig = field(default_factory=SecurityConfig)
    transactional: bool = False  # micro-batches in transactions (streaming only)


def _setting(options: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """(option name, value) of a producer setting given as replog.NAME or kafka.NAME."""
    given = {
        prefix + name: options[prefix + name].strip()
        for prefix in (REPLOG_PREFIX, KAFKA_PREFIX)
        if prefix + name in options
    }
    if len(set(given.values())) > 1:
        raise ConfigError(
            f"{REPLOG_PREFIX}{name} and {KAFKA_PREFIX}{name} have different values; give one"
        )
    if not given:
        return None
    option = next(iter(given))
    return option, given[option]


def _positive_int(option: str, text: str, may_be_zero: bool) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{option}={text!r}: expected a whole number") from None
    if value < 0 or (value == 0 and not may_be_zero):
        least = "0 or more" if may_be_zero else "positive"
        raise ConfigError(f"{option}={text!r}: must be {least}")
    return value


def _is_security_option(name: str, prefix: str) -> bool:
    return name.startswith(prefix) and is_security_setting(name[len(prefix) :])


def parse_producer_settings(options: Mapping[str, str]) -> ProducerSettings:
    """The producer settings among `options`; unknown `replog.` options fail by name.

    Security options are not producer settings: parse_sink_options reads them.
    """
    unknown = sorted(
        name
        for name in options
        if name.startswith(REPLOG_PREFIX)
        and name not in KNOWN_REPLOG_OPTIONS
        and not _is_security_option(name, REPLOG_PREFIX)
    )
    if unknown:
        raise ConfigError(
            f"unknown sink option {', '.join(unknown)}; the sink knows "
            f"{', '.join(sorted(KNOWN_REPLOG_OPTIONS))} and {TOPIC_OPTION}"
        )
    known_kafka = {KAFKA_PREFIX + name for name in PRODUCER_SETTINGS} | _CONNECTION_OPTIONS
    for name in sorted(options):
        if (
            name.startswith(KAFKA_PREFIX)
            and name not in known_kafka
            and not _is_security_option(name, KAFKA_PREFIX)
        ):
            log.warning("sink option %s %s", name, _IGNORED_KAFKA_NOTE)
    values: dict[str, Any] = {}
    compression = _setting(options, COMPRESSION_TYPE)
    if compression is not None:
        option, text = compression
        values["compression_type"] = parse_compression(text, option)
    acks = _setting(options, ACKS)
    if acks is not None:
        option, text = acks
        try:
            values["acks"] = parse_acks(text)
        except ConfigError:
            raise ConfigError(f"{option}={text!r}: use 0, 1 or all") from None
    for name in _INTEGER_SETTINGS:
        found = _setting(options, name)
        if found is not None:
            values[name.replace(".", "_")] = _positive_int(*found, name in _MAY_BE_ZERO)
    settings = ProducerSettings(**values)
    in_flight = settings.max_in_flight_requests_per_connection
    if settings.acks == ACKS_ALL and in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
        raise ConfigError(
            f"{REPLOG_PREFIX}{MAX_IN_FLIGHT}={in_flight}: with acks=all (idempotent) at most "
            f"{MAX_IDEMPOTENT_IN_FLIGHT} batches per partition can be in flight"
        )
    if settings.delivery_timeout_ms < settings.request_timeout_ms:
        raise ConfigError(
            f"{REPLOG_PREFIX}{DELIVERY_TIMEOUT_MS}={settings.delivery_timeout_ms} is shorter "
            f"than {REPLOG_PREFIX}{REQUEST_TIMEOUT_MS}={settings.request_timeout_ms}; "
            "a delivery must allow at least one whole request"
        )
    return settings


def topic_option(options: Mapping[str, str]) -> str | None:
    """The `topic` option, checked against the topic name rules; None when not given."""
    if TOPIC_OPTION not in options:
        return None
    topic = options[TOPIC_OPTION].strip()
    try:
        return validate_topic_name(topic)
    except InvalidTopicError as exc:
        raise ConfigError(f"option {TOPIC_OPTION}: {exc}") from exc


def transactional_option(options: Mapping[str, str]) -> bool:
    """The `transactional` option: true or false (any case), false when not given."""
    text = options.get(TRANSACTIONAL_OPTION, "false")
    value = _BOOLEANS.get(text.strip().lower())
    if value is None:
        raise ConfigError(f"option {TRANSACTIONAL_OPTION}={text!r}: use true or false")
    return value


def sink_transactional_id(options: Mapping[str, str]) -> str:
    """The transactional id of a transactional stream write: `transactional.id` if given,
    else one derived from the query's checkpoint location.

    Spark shows the stream writer its options only, not the query id (a task-local
    property), and the checkpoint location is what stays the same across the query's
    restarts, as the id must: a restarted driver's InitProducerId with the same id is
    what aborts the transaction its predecessor left open.
    """
    given = options.get(TRANSACTIONAL_ID_OPTION)
    if given is not None:
        if not given.strip():
            raise ConfigError(f"option {TRANSACTIONAL_ID_OPTION} must not be empty")
        return given.strip()
    checkpoint = options.get(CHECKPOINT_OPTION)
    if not checkpoint:
        raise ConfigError(
            f"{TRANSACTIONAL_OPTION}=true needs a transactional id that survives restarts: "
            f"set the option {TRANSACTIONAL_ID_OPTION}, or the checkpointLocation option "
            "(the id is then derived from it)"
        )
    digest = hashlib.blake2b(checkpoint.encode(), digest_size=10).hexdigest()
    return SINK_TRANSACTIONAL_ID_PREFIX + digest


def _is_binary_or_string(data_type: object) -> bool:
    return isinstance(data_type, BinaryType | StringType)


def _is_headers_type(data_type: object) -> bool:
    """array<struct<key: string, value: binary>>, whatever the nullability of its parts."""
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return (
        [f.name for f in fields] == ["key", "value"]
        and isinstance(fields[0].dataType, StringType)
        and isinstance(fields[1].dataType, BinaryType)
    )


def validate_sink_schema(
    schema: StructType, topic: str | None, avro: AvroCodec | None = None
) -> SinkColumns:
    """Check the input columns as Spark's Kafka sink does; say which column is wrong.

    Column names match exactly (as in Kafka's sink). The `topic` column is not looked at
    when the `topic` option is given, because the option overrides it.
    """
    by_name = {field.name: field.dataType for field in schema.fields}
    if "value" not in by_name:
        raise ConfigError(
            "the sink needs a 'value' column (binary or string); the input has "
            f"{', '.join(repr(n) for n in by_name) or 'no columns'}"
        )
    if avro is not None:
        if by_name["value"].simpleString() != avro.spark_type.simpleString():
            raise ConfigError(
                f"column 'value' must match avroSchema, i.e. be "
                f"{avro.spark_type.simpleString()}, not {by_name['value'].simpleString()}"
            )
    elif not _is_binary_or_string(by_name["value"]):
        raise ConfigError(
            f"column 'value' must be binary or string, not {by_name['value'].simpleString()}; "
            "cast it, e.g. to_json(...) or col('value').cast('string')"
        )
    if "key" in by_name and not _is_binary_or_string(by_name["key"]):
        raise ConfigError(
            f"column 'key' must be binary or string, not {by_name['key'].simpleString()}"
        )
    uses_topic_column = topic is None
    if uses_topic_column:
        if "topic" not in by_name:
            raise ConfigError(
                f"no topic: set the '{TOPIC_OPTION}' option or give the input a 'topic' "
                "column (string)"
            )
        if not isinstance(by_name["topic"], StringType):
            raise ConfigError(
                f"column 'topic' must be string, not {by_name['topic'].simpleString()}"
            )
    if "partition" in by_name and not isinstance(by_name["partition"], IntegerType):
        raise ConfigError(
            f"column 'partition' must be int, not {by_name['partition'].simpleString()}; "
            "cast it with col('partition').cast('int')"
        )
    if "headers" in by_name and not _is_headers_type(by_name["headers"]):
        raise ConfigError(
            "column 'headers' must be array<struct<key:string,value:binary>>, not "
            f"{by_name['headers'].simpleString()}"
        )
    return SinkColumns(
        key="key" in by_name,
        topic=uses_topic_column,
        partition="partition" in by_name,
        headers="headers" in by_name,
    )


def check_batch_save_mode(overwrite: bool) -> None:
    """df.write: only appending makes sense for a log, as for Spark's Kafka sink."""
    if overwrite:
        raise ConfigError(
            "save mode 'overwrite' is not supported: a replog topic is an append-only log "
            "that cannot be truncated by a write; use mode('append')"
        )


def parse_sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """Check everything on the driver, so that a bad option fails before any task runs.

    That includes loading the CA and client certificate files the security options
    name, which the driver would otherwise never open: the tasks alone connect.
    """
    security = SecurityConfig.from_spark_options(options)
    security.client_ssl_context()
    topic = topic_option(options)
    avro = codec_from_options(options)
    columns = validate_sink_schema(schema, topic, avro)
    producer = parse_producer_settings(options)
    transactional = transactional_option(options)
    if transactional and producer.acks != ACKS_ALL:
        raise ConfigError(
            f"{TRANSACTIONAL_OPTION}=true needs acks=all: transactions are written by "
            "idempotent producers"
        )
    return SinkOptions(
        bootstrap_servers(options), topic, columns, producer, avro, security, transactional
    )
