"""Which committed offsets of a group have expired: Kafka's rules, as pure functions.

Kafka (KIP-211) keeps a group's offsets while the group is in use and lets them go
`offsets.retention.minutes` after it stops being used:

- an empty group (no members): its offsets expire retention after the group became
  empty; where that moment is unknown (a coordinator that never saw the group with
  members, or a group of standalone consumers that only commit), retention after each
  offset's own commit;
- a Stable group of the consumer protocol: the offsets of topics no member subscribes to
  expire retention after their commit; the others are kept;
- any other group with members (rebalancing, or another protocol): nothing expires.

One departure: an offset committed after the group became empty (an admin's reset of an
empty group) is kept for retention after that commit too, where Kafka would count from
the emptying alone and could drop a fresh reset at once.

An offset whose commit time is unknown (-1) expires only by the emptying rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.wire.primitives import Buffer, Reader

UNKNOWN_TIME = -1


def expired_offsets(
    offsets: Mapping[TopicPartition, OffsetValue],
    now_ms: int,
    retention_ms: int,
    *,
    has_members: bool,
    empty_since_ms: int | None = None,
    subscribed_topics: set[str] | None = None,
) -> set[TopicPartition]:
    """The offsets to delete now.

    `empty_since_ms`: when the group was seen to become empty (None if unknown);
    `subscribed_topics`: for a Stable consumer-protocol group, the topics its members
    subscribe to (None otherwise)."""
    if has_members and subscribed_topics is None:
        return set()
    expired = set()
    for tp, committed in offsets.items():
        if has_members:
            assert subscribed_topics is not None
            if tp.topic in subscribed_topics:
                continue
            since = committed.commit_timestamp_ms
        else:
            since = max(empty_since_ms or UNKNOWN_TIME, committed.commit_timestamp_ms)
        if since != UNKNOWN_TIME and now_ms - since >= retention_ms:
            expired.add(tp)
    return expired


def subscribed_topics(subscriptions: Iterable[Buffer]) -> set[str] | None:
    """The topics named by consumer-protocol subscriptions (each member's JoinGroup
    metadata for the chosen protocol: version int16, then [topic string], then fields
    the coordinator does not need); None if one cannot be read, so nothing expires."""
    topics: set[str] = set()
    for subscription in subscriptions:
        try:
            reader = Reader(subscription)
            if reader.int16() < 0:
                return None
            count = reader.array_length()
            if count < 0:
                return None
            topics.update(reader.required_string() for _ in range(count))
        except ProtocolError:
            return None
    return topics
