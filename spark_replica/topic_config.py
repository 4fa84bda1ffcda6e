"""Per-topic configuration: the keys replog understands, with Kafka's names and rules.

Values travel as strings (CLI, wire, ZooKeeper) and are checked here, once, before
anything is written: an unknown key or a bad value is a ConfigError naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from spark_replica.errors import ConfigError, InvalidConfigError

MIN_INSYNC_REPLICAS = "min.insync.replicas"


def _long(minimum: int) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"config {key}={raw!r}: not an integer") from None
        if value < minimum:
            raise ConfigError(f"config {key}={raw!r}: must be at least {minimum}")
        return value

    return parse


def _boolean(key: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"config {key}={raw!r}: must be true or false")
    return lowered == "true"


# Kafka's compression.type values: the codec fetched batches are sent with, "producer"
# for each batch's own.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
DEFAULT_COMPRESSION_TYPE = "producer"


def parse_compression_type(key: str, raw: str) -> str:
    if raw not in COMPRESSION_TYPES:
        raise ConfigError(f"config {key}={raw!r}: must be one of {', '.join(COMPRESSION_TYPES)}")
    return raw


# Kafka's cleanup.policy: a list of "delete" (time and size retention) and "compact"
# (the log cleaner keeps the last record per key). Kept in one spelling per set, so
# that "delete,compact" and "compact,delete" are the same policy everywhere.
DELETE = "delete"
COMPACT = "compact"
COMPACT_DELETE = f"{COMPACT},{DELETE}"
CLEANUP_POLICIES = (DELETE, COMPACT, COMPACT_DELETE)


def parse_cleanup_policy(key: str, raw: str) -> str:
    """The policy in its one spelling; a ConfigError for an empty or unknown item."""
    items = {item.strip().lower() for item in raw.split(",")}
    if not items <= {DELETE, COMPACT}:
        raise ConfigError(
            f"config {key}={raw!r}: must be delete, compact, or both as compact,delete"
        )
    if items == {DELETE, COMPACT}:
        return COMPACT_DELETE
    return items.pop()


def parse_ratio(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"config {key}={raw!r}: not a number") from None
    if not 0 <= value <= 1:
        raise ConfigError(f"config {key}={raw!r}: must be between 0 and 1")
    return value


# key -> parser; -1 means "unlimited" where Kafka allows it.
TOPIC_CONFIG_PARSERS: dict[str, Callable[[str, str], int | bool | str | float]] = {
    "retention.ms": _long(-1),
    "retention.bytes": _long(-1),
    "segment.bytes": _long(1024),
    "segment.ms": _long(1),
    "segment.index.bytes": _long(4),
    "index.interval.bytes": _long(0),
    "flush.messages": _long(1),
    "flush.ms": _long(0),
    "max.message.bytes": _long(64),
    "min.insync.replicas": _long(1),
    "unclean.leader.election.enable": _boolean,
    "compression.type": parse_compression_type,
    "cleanup.policy": parse_cleanup_policy,
    "delete.retention.ms": _long(0),
    "min.compaction.lag.ms": _long(0),
    "max.compaction.lag.ms": _long(1),
    "min.cleanable.dirty.ratio": parse_ratio,
}


def parse_topic_configs(configs: Mapping[str, str]) -> dict[str, int | bool | str | float]:
    """Parse and check every entry; raise ConfigError on the first bad one."""
    parsed: dict[str, int | bool | str | float] = {}
    for key, raw in configs.items():
        parser = TOPIC_CONFIG_PARSERS.get(key)
        if parser is None:
            known = ", ".join(sorted(TOPIC_CONFIG_PARSERS))
            raise ConfigError(f"unknown topic config {key!r}; known keys: {known}")
        parsed[key] = parser(key, raw)
    return parsed


def check_min_insync_fits(topic: str, min_insync: int, replication_factor: int) -> None:
    """Refuse a min.insync.replicas no ISR of the topic could ever reach: every acks=all
    write to it would wait its whole delivery timeout and then fail."""
    if min_insync > replication_factor:
        raise InvalidConfigError(
            f"topic {topic!r}: min.insync.replicas={min_insync} is above its replication "
            f"factor {replication_factor}, so no acks=all write could ever succeed; lower "
            "min.insync.replicas or raise the replication factor"
        )


def parse_assignments(items: list[str]) -> dict[str, str]:
    """Turn CLI `key=value` items into a dict, checking each has an '='."""
    result: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"config {item!r} is not key=value")
        result[key.strip()] = value.strip()
    return result
