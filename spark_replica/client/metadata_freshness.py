"""Which metadata answer to believe, and which broker to ask next: pure rules, no I/O.

Brokers learn each partition's leader from the controller, at slightly different
moments, and a broker that was paused or cut off can answer from a cache several
elections old. A client that asks one broker after another must therefore not take
every answer as news. The leader epoch orders them: every election bumps it, so an
answer naming an older epoch than one already known is old news for that partition and
is ignored, while an equal or newer one replaces what was known (Kafka's KIP-320 rule).
An answer without an epoch (negative) carries no order and is taken as it is, as
Kafka's clients do.

Per topic: partitions the answer leaves out are kept (a lagging broker may not know
partitions added since), and an answer with a topic-level error (unknown topic, no
leader yet) replaces the topic whole. Without topic ids a client cannot tell a deleted
topic from a broker that has not heard of it yet; the callers' retry loops ask again.

Asking: a refresh starts at the known broker after the one asked last time rather than
always at the first, so one lagging or overloaded broker is not the only source of
metadata.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_replica.wire.native.metadata import PartitionMetadata, TopicMetadata


def is_older(known: PartitionMetadata, answered: PartitionMetadata) -> bool:
    """Whether `answered` describes an earlier leader election than `known`."""
    if known.leader_epoch < 0 or answered.leader_epoch < 0:
        return False
    return answered.leader_epoch < known.leader_epoch


def fresher_partition(
    known: PartitionMetadata | None, answered: PartitionMetadata
) -> PartitionMetadata:
    """The partition state to keep: the answer, unless it is older than what is known."""
    if known is not None and is_older(known, answered):
        return known
    return answered


def merge_topic(known: TopicMetadata | None, answered: TopicMetadata) -> TopicMetadata:
    """A topic's metadata after an answer, keeping per partition the newer knowledge."""
    if known is None or known.error_code or answered.error_code:
        return answered
    merged = {p.partition: p for p in known.partitions}
    for partition in answered.partitions:
        merged[partition.partition] = fresher_partition(merged.get(partition.partition), partition)
    return TopicMetadata(
        answered.topic,
        [merged[number] for number in sorted(merged)],
        answered.error_code,
        answered.error_message,
    )


def merge_topics(
    known: dict[str, TopicMetadata], answered: Iterable[TopicMetadata], *, complete: bool
) -> dict[str, TopicMetadata]:
    """Every topic's metadata after an answer.

    `complete` says the answer lists every topic the broker knows (a request for all
    topics): then a topic it leaves out is forgotten, as deleted.
    """
    merged = {} if complete else dict(known)
    for topic in answered:
        merged[topic.topic] = merge_topic(known.get(topic.topic), topic)
    return merged


def in_turn(broker_ids: Iterable[int], last_asked: int | None) -> list[int]:
    """Broker ids in ascending order, starting after `last_asked` and wrapping around.

    Keyed on the id rather than a position, so the turn survives brokers joining or
    leaving the list between two refreshes.
    """
    ordered = sorted(broker_ids)
    if last_asked is None:
        return ordered
    later = [broker_id for broker_id in ordered if broker_id > last_asked]
    return later + [broker_id for broker_id in ordered if broker_id <= last_asked]
