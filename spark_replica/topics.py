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
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


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
