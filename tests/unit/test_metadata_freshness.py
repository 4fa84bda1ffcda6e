"""The client's metadata freshness rule (KIP-320) and broker rotation, with plain values."""

from __future__ import annotations

import asyncio

from spark_replica.client import Cluster
from spark_replica.client.metadata_freshness import (
    fresher_partition,
    in_turn,
    merge_topic,
    merge_topics,
)
from spark_replica.errors import UnknownTopicOrPartitionError
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.metadata import (
    NO_LEADER,
    BrokerInfo,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)

UNKNOWN_TOPIC = UnknownTopicOrPartitionError.code


def state(partition: int, leader: int, epoch: int) -> PartitionMetadata:
    return PartitionMetadata(partition, leader, epoch, [1, 2, 3], [1, 2, 3])


def topic(*partitions: PartitionMetadata, name: str = "t", error: int = 0) -> TopicMetadata:
    return TopicMetadata(name, list(partitions), error)


def test_an_older_epoch_never_replaces_a_newer_one() -> None:
    newer = state(0, leader=2, epoch=5)
    assert fresher_partition(newer, state(0, leader=1, epoch=4)) is newer


def test_an_equal_or_newer_epoch_replaces_what_was_known() -> None:
    known = state(0, leader=1, epoch=4)
    same_epoch = state(0, leader=NO_LEADER, epoch=4)
    assert fresher_partition(known, same_epoch) is same_epoch
    newer = state(0, leader=3, epoch=9)
    assert fresher_partition(known, newer) is newer
    assert fresher_partition(None, known) is known


def test_an_answer_without_an_epoch_is_taken_as_it_is() -> None:
    unordered = state(0, leader=3, epoch=-1)
    assert fresher_partition(state(0, leader=1, epoch=4), unordered) is unordered


def test_a_topic_keeps_the_newer_state_per_partition() -> None:
    known = topic(state(0, 2, 5), state(1, 1, 3))
    answer = topic(state(0, 1, 4), state(1, 3, 4))
    merged = merge_topic(known, answer)
    assert [(p.partition, p.leader, p.leader_epoch) for p in merged.partitions] == [
        (0, 2, 5),
        (1, 3, 4),
    ]


def test_partitions_a_lagging_broker_does_not_know_yet_are_kept() -> None:
    known = topic(state(0, 1, 1), state(1, 2, 1), state(2, 3, 1))
    merged = merge_topic(known, topic(state(1, 2, 1), state(0, 1, 1)))
    assert [p.partition for p in merged.partitions] == [0, 1, 2]


def test_a_topic_error_replaces_the_topic_whole() -> None:
    gone = topic(error=UNKNOWN_TOPIC)
    assert merge_topic(topic(state(0, 1, 7)), gone) is gone
    fresh = topic(state(0, 1, 0))
    assert merge_topic(gone, fresh) is fresh


def test_a_complete_answer_forgets_topics_it_leaves_out() -> None:
    known = {"a": topic(state(0, 1, 2), name="a"), "b": topic(state(0, 1, 2), name="b")}
    answer = [topic(state(0, 2, 1), name="a")]
    partial = merge_topics(known, answer, complete=False)
    assert sorted(partial) == ["a", "b"]
    assert partial["a"].partitions[0].leader == 1, "epoch 1 is older than 2"
    assert sorted(merge_topics(known, answer, complete=True)) == ["a"]


def test_each_refresh_starts_after_the_broker_asked_last() -> None:
    assert in_turn([3, 1, 2], None) == [1, 2, 3]
    assert in_turn([3, 1, 2], 1) == [2, 3, 1]
    assert in_turn([3, 1, 2], 3) == [1, 2, 3]
    assert in_turn([1, 3, 4], 2) == [3, 4, 1], "the turn survives a broker leaving"
    assert in_turn([], 2) == []


def test_a_cluster_given_a_stale_answer_keeps_the_newer_leader() -> None:
    """The same rule where the client applies Metadata answers (no broker needed)."""
    brokers = [BrokerInfo(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)]
    newer = MetadataResponse(brokers, 1, [topic(state(0, 2, 6))])
    stale = MetadataResponse(brokers, 1, [topic(state(0, 1, 5))])

    async def scenario() -> int:
        cluster = Cluster([("127.0.0.1", 9001)])
        cluster.apply_metadata(newer, complete=False)
        cluster.apply_metadata(stale, complete=False)
        return cluster.leader_for(TopicPartition("t", 0))

    assert asyncio.run(scenario()) == 2
