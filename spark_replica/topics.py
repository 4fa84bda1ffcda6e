"""Topic names and topic-partitions: the rules every edge enforces.

Names follow Kafka's rules so that pipelines move over unchanged: 1 to 249 characters
from ASCII letters, digits, '.', '_' and '-', and neither "." nor "..".
"""

from __future__ import annotations

import re
from typing import NamedTuple

from spark_replica.errors import InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
# The brokers' own topics, as Kafka marks them internal: clients may read them but not
# produce to them, Metadata says is_internal, and pattern subscriptions leave them out
# (Kafka's exclude.internal.topics, on by default in consumers and Spark's source).
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def java_string_hash(text: str) -> int:
    """Java's String.hashCode of `text`: 31·h + c over UTF-16 code units, wrapping at
    32 bits, as a signed int."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for index in range(0, len(data), 2):
        h = (31 * h + (data[index] << 8 | data[index + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, partition_count: int) -> int:
    """The partition of the offsets topic that holds `group_id`: Kafka's rule,
    `abs(hash) mod partitions` with Java's String.hashCode and Kafka's abs (which sends
    -2^31, the one int without a positive, to 0), so Kafka's tools agree. The group's
    coordinator is that partition's leader: a broker starting or stopping moves only the
    groups of the partitions it led."""
    return _coordinator_partition(group_id, partition_count, OFFSETS_TOPIC)


def transaction_partition_for(transactional_id: str, partition_count: int) -> int:
    """The partition of `__transaction_state` that holds `transactional_id`, by the same
    rule as a group's: its leader is the transaction coordinator of that id."""
    return _coordinator_partition(transactional_id, partition_count, TRANSACTION_STATE_TOPIC)


def _coordinator_partition(key: str, partition_count: int, topic: str) -> int:
    if partition_count < 1:
        raise ValueError(f"{topic} has {partition_count} partitions")
    h = java_string_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partition_count


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def validate_topic_name(name: str) -> str:
    """Return `name` if it is a legal topic name; raise InvalidTopicError saying why if not."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters, the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise InvalidTopicError(f"topic name {shown!r} has characters outside [a-zA-Z0-9._-]")
    return name
