"""The source options of `format("replog")`: Kafka's names and meanings, checked once.

A pipeline moves here from `format("kafka")` unchanged, so every option keeps the name,
default and meaning it has in Spark's Kafka source. Parsing is pure (no cluster) and
happens when Spark builds a reader, so a bad or conflicting option fails the query at
planning with a ConfigError that names the option, never halfway through a read.

Spark hands options over with lower-cased keys; lookups here are by lower-case name and
messages use the spelling users write.

`kafka.isolation.level` is the Kafka consumer setting Spark's Kafka source passes on:
read_uncommitted (the default) or read_committed, which plans every range below the
last stable offset and drops the records of aborted transactions (the client's
range reader). Transaction markers are never rows, under either level.

Security settings (`kafka.security.protocol`, `kafka.sasl.jaas.config`, ... or the same
under `replog.`) are read by spark_replica.security.settings; one that replog does not
support fails the query by name rather than being ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql.types import StructType

from connectors.spark.avro import AvroCodec, codec_from_options
from connectors.spark.schema import source_schema
from spark_replica.client import IsolationLevel
from spark_replica.errors import ConfigError
from spark_replica.partition_offsets import (
    EARLIEST,
    LATEST,
    Offsets,
    decode_offsets,
    parse_offsets_json,
)
from spark_replica.security.settings import SecurityConfig
from spark_replica.topics import TopicPartition, is_internal

SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
ASSIGN = "assign"
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_BY_TIMESTAMP = "startingOffsetsByTimestamp"
STARTING_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
ENDING_TIMESTAMP = "endingTimestamp"
ENDING_BY_TIMESTAMP = "endingOffsetsByTimestamp"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
MIN_OFFSETS_PER_TRIGGER = "minOffsetsPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"
MIN_PARTITIONS = "minPartitions"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
INCLUDE_HEADERS = "includeHeaders"
POLL_TIMEOUT = "kafkaConsumer.pollTimeoutMs"
ISOLATION_LEVEL = "kafka.isolation.level"

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
# How long an executor keeps trying to read its range while no record arrives (leader
# changes, a broker restarting) before the task fails; Kafka's default for this option.
DEFAULT_POLL_TIMEOUT_MS = 120_000

# Consumer settings Kafka's source refuses because the source manages them itself.
_REFUSED_KAFKA_OPTIONS = {
    "kafka.auto.offset.reset": f"set the source option {STARTING_OFFSETS} instead",
    "kafka.enable.auto.commit": "offsets live in the query's checkpoint, not in the cluster",
    "kafka.key.deserializer": "key is always binary; cast or parse it in the DataFrame",
    "kafka.value.deserializer": "value is always binary; cast or parse it in the DataFrame",
    "kafka.interceptor.classes": "the source runs no consumer interceptors",
}

_DURATION = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?")
_DURATION_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}

OffsetKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: named topics, a pattern, or fixed partitions."""

    mode: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def wants(self, topic: str) -> bool:
        if self.mode == SUBSCRIBE_PATTERN:
            assert self.pattern is not None
            # As Spark's Kafka source (exclude.internal.topics): a pattern never
            # matches the brokers' own topics; they can still be named.
            return not is_internal(topic) and re.fullmatch(self.pattern, topic) is not None
        if self.mode == ASSIGN:
            return any(tp.topic == topic for tp in self.partitions)
        return topic in self.topics

    def topic_names(self) -> list[str] | None:
        """The topics to ask the cluster about; None means all of them (a pattern)."""
        if self.mode == SUBSCRIBE_PATTERN:
            return None
        if self.mode == ASSIGN:
            return sorted({tp.topic for tp in self.partitions})
        return list(self.topics)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, as an option gave it, before the cluster is asked.

    `offsets` holds offsets (with -2/-1) for kind "offsets", timestamps in ms for kind
    "timestamps"; `timestamp` is the one timestamp of kind "timestamp".
    """

    kind: OffsetKind
    option: str
    offsets: Offsets = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: Literal["error", "latest"]
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    avro: AvroCodec | None = None
    security: SecurityConfig = field(default_factory=SecurityConfig)
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED


def include_headers(options: Mapping[str, str]) -> bool:
    """Whether rows carry the `headers` column (the schema depends on it)."""
    return _boolean(_lower(options), INCLUDE_HEADERS, False)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check every source option and return them parsed; raise ConfigError on the first bad one.

    Defaults are Kafka's: a stream starts at latest, a batch read at earliest and ends
    at latest. Of the ways to say where to start, startingTimestamp wins over
    startingOffsetsByTimestamp, which wins over startingOffsets (likewise for the end).
    """
    opts = _lower(options)
    for name, advice in _REFUSED_KAFKA_OPTIONS.items():
        if name in opts:
            raise ConfigError(f"option {name} is not supported: {advice}")
    security = SecurityConfig.from_spark_options(opts)
    subscription = _subscription(opts)
    starting = _starting(opts, subscription, streaming)
    ending = _ending(opts, subscription, streaming)
    strategy = opts.get(STARTING_TIMESTAMP_STRATEGY.lower(), "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            f"{STARTING_TIMESTAMP_STRATEGY}={strategy!r}: use error (fail when no record is "
            "that recent) or latest (start such partitions at their latest offset)"
        )
    max_offsets = _positive(opts, MAX_OFFSETS_PER_TRIGGER)
    min_offsets = _positive(opts, MIN_OFFSETS_PER_TRIGGER)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise ConfigError(
            f"{MIN_OFFSETS_PER_TRIGGER}={min_offsets} is above "
            f"{MAX_OFFSETS_PER_TRIGGER}={max_offsets}: no batch could satisfy both"
        )
    delay = opts.get(MAX_TRIGGER_DELAY.lower())
    return SourceOptions(
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=(
            DEFAULT_MAX_TRIGGER_DELAY_MS
            if delay is None
            else parse_duration_ms(delay, MAX_TRIGGER_DELAY)
        ),
        min_partitions=_positive(opts, MIN_PARTITIONS),
        fail_on_data_loss=_boolean(opts, FAIL_ON_DATA_LOSS, True),
        include_headers=_boolean(opts, INCLUDE_HEADERS, False),
        poll_timeout_ms=_positive(opts, POLL_TIMEOUT) or DEFAULT_POLL_TIMEOUT_MS,
        avro=codec_from_options(opts),
        security=security,
        isolation_level=_isolation_level(opts),
    )


def _isolation_level(opts: dict[str, str]) -> IsolationLevel:
    try:
        return IsolationLevel.parse(opts.get(ISOLATION_LEVEL, "read_uncommitted"))
    except ConfigError as exc:
        raise ConfigError(f"{ISOLATION_LEVEL}: {exc}") from None


def check_schema(schema: StructType, with_headers: bool, avro: AvroCodec | None = None) -> None:
    """Refuse a user-specified schema: the rows always have Kafka's fixed schema.

    Spark passes the reader the user's schema when one was given, else the source's
    own; anything but the source's own schema means the user gave a different one.
    """
    expected = source_schema(with_headers, None if avro is None else avro.spark_type)
    if schema != expected:
        raise ConfigError(
            'format("replog") has a fixed schema and takes no user-specified schema '
            f"(remove .schema(...)): expected {expected.simpleString()}, got "
            f"{schema.simpleString()}; set {INCLUDE_HEADERS}=true for the headers column"
        )


def parse_duration_ms(text: str, option: str) -> int:
    """Spark's duration strings: "15m", "30s", "500ms", "2h", "1d"; a bare number is ms."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ConfigError(f"{option}={text!r} is not a duration such as 500ms, 30s, 15m or 1h")
    return int(match.group(1)) * _DURATION_MS[match.group(2) or "ms"]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [name for name in (ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN) if name.lower() in opts]
    if len(given) != 1:
        named = " and ".join(given) if given else "none"
        raise ConfigError(
            f"give exactly one of {ASSIGN}, {SUBSCRIBE} or {SUBSCRIBE_PATTERN} (got {named})"
        )
    (mode,) = given
    value = opts[mode.lower()].strip()
    if mode == SUBSCRIBE:
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ConfigError(f"{SUBSCRIBE}: give a comma-separated list of topics, not {value!r}")
        return Subscription(SUBSCRIBE, topics=topics)
    if mode == SUBSCRIBE_PATTERN:
        if not value:
            raise ConfigError(f"{SUBSCRIBE_PATTERN}: the pattern is empty")
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(f"{SUBSCRIBE_PATTERN}={value!r} is not a regex: {exc}") from None
        return Subscription(SUBSCRIBE_PATTERN, pattern=value)
    return Subscription(ASSIGN, partitions=_assignment(value))


def _assignment(value: str) -> tuple[TopicPartition, ...]:
    example = '{"topicA": [0, 1], "topicB": [2, 4]}'
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise ConfigError(f"{ASSIGN}: not valid JSON, expected e.g. {example}: {value!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"{ASSIGN}: expected a JSON object such as {example}, got {value!r}")
    partitions = []
    for topic, numbers in parsed.items():
        if not isinstance(numbers, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers
        ):
            raise ConfigError(
                f"{ASSIGN}: partitions of {topic!r} must be a list of partition numbers, "
                f"e.g. {example}"
            )
        partitions += [TopicPartition(topic, n) for n in numbers]
    if not partitions:
        raise ConfigError(f"{ASSIGN}: no partition given in {value!r}")
    return tuple(sorted(set(partitions)))


def _starting(opts: dict[str, str], subscription: Subscription, streaming: bool) -> OffsetSpec:
    if STARTING_TIMESTAMP.lower() in opts:
        return OffsetSpec(
            "timestamp", STARTING_TIMESTAMP, timestamp=_timestamp(opts, STARTING_TIMESTAMP)
        )
    if STARTING_BY_TIMESTAMP.lower() in opts:
        return _by_timestamp(opts, STARTING_BY_TIMESTAMP, subscription)
    raw = opts.get(STARTING_OFFSETS.lower(), "latest" if streaming else "earliest").strip()
    spec = _offsets(raw, STARTING_OFFSETS, subscription)
    if not streaming and (spec.kind == "latest" or any(o == LATEST for o in spec.offsets.values())):
        raise ConfigError(
            f"{STARTING_OFFSETS}: latest (or -1) is not allowed in a batch read, it would "
            "read nothing; use earliest, offsets, or a stream"
        )
    return spec


def _ending(opts: dict[str, str], subscription: Subscription, streaming: bool) -> OffsetSpec:
    names = (ENDING_OFFSETS, ENDING_TIMESTAMP, ENDING_BY_TIMESTAMP)
    if streaming:
        for name in names:
            if name.lower() in opts:
                raise ConfigError(f"{name} is for batch reads only; a stream has no end")
        return OffsetSpec("latest", ENDING_OFFSETS)
    if ENDING_TIMESTAMP.lower() in opts:
        return OffsetSpec(
            "timestamp", ENDING_TIMESTAMP, timestamp=_timestamp(opts, ENDING_TIMESTAMP)
        )
    if ENDING_BY_TIMESTAMP.lower() in opts:
        return _by_timestamp(opts, ENDING_BY_TIMESTAMP, subscription)
    spec = _offsets(
        opts.get(ENDING_OFFSETS.lower(), "latest").strip(), ENDING_OFFSETS, subscription
    )
    if spec.kind == "earliest" or any(o == EARLIEST for o in spec.offsets.values()):
        raise ConfigError(
            f"{ENDING_OFFSETS}: earliest (or -2) is not allowed, it would read nothing; "
            "use latest or offsets"
        )
    return spec


def _offsets(raw: str, option: str, subscription: Subscription) -> OffsetSpec:
    lowered = raw.lower()
    if lowered == "earliest":
        return OffsetSpec("earliest", option)
    if lowered == "latest":
        return OffsetSpec("latest", option)
    if not raw.startswith("{"):
        raise ConfigError(
            f"{option}={raw!r}: use earliest, latest, or JSON such as "
            '{"topic": {"0": 23, "1": -2}} (-2 earliest, -1 latest)'
        )
    offsets = parse_offsets_json(raw, option)
    _check_subscribed(offsets, option, subscription)
    return OffsetSpec("offsets", option, offsets=offsets)


def _by_timestamp(opts: dict[str, str], option: str, subscription: Subscription) -> OffsetSpec:
    raw = opts[option.lower()].strip()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(
            f'{option}: not valid JSON, expected e.g. {{"topic": {{"0": 1700000000000}}}}'
        ) from None
    timestamps = decode_offsets(parsed, option)
    negative = [tp for tp, ts in timestamps.items() if ts < 0]
    if negative:
        raise ConfigError(f"{option}: timestamp of {negative[0]} must be ms since the epoch (>= 0)")
    _check_subscribed(timestamps, option, subscription)
    return OffsetSpec("timestamps", option, offsets=timestamps)


def _check_subscribed(offsets: Offsets, option: str, subscription: Subscription) -> None:
    """Offsets may only name partitions the query reads, as Kafka's source requires."""
    for tp in sorted(offsets):
        if subscription.mode == ASSIGN:
            if tp not in subscription.partitions:
                raise ConfigError(f"{option} names {tp}, which {ASSIGN} does not include")
        elif not subscription.wants(tp.topic):
            raise ConfigError(
                f"{option} names topic {tp.topic!r}, which the subscription does not include"
            )


def _timestamp(opts: dict[str, str], option: str) -> int:
    raw = opts[option.lower()].strip()
    if not raw.isdigit():
        raise ConfigError(f"{option}={raw!r} is not a timestamp in ms since the epoch")
    return int(raw)


def _positive(opts: dict[str, str], option: str) -> int | None:
    raw = opts.get(option.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{option}={raw!r} is not a whole number") from None
    if value <= 0:
        raise ConfigError(f"{option}={raw!r} must be a positive number")
    return value


def _boolean(opts: dict[str, str], option: str, default: bool) -> bool:
    raw = opts.get(option.lower())
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{option}={raw!r}: use true or false")
    return lowered == "true"
