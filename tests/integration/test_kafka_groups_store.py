"""Committed offsets in a real ZooKeeper: written, read back, listed and deleted; written
in multi-ops within the byte bound, fenced by the coordinator's claim, refused for a
deleted topic and removed with it, expired."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from spark_replica.errors import (
    InvalidGroupIdError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
    ZooKeeperError,
)
from spark_replica.topics import TopicPartition
from spark_replica.zk import group_store, znodes
from spark_replica.zk.group_store import CommittedOffset
from spark_replica.zk.session import connect

pytestmark = pytest.mark.slow


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    client = connect(zk_connect)
    for topic in ("t", "u", "big"):
        client.create(znodes.topic_path(topic), b"{}", makepath=True)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_commits_are_read_back_and_overwritten(zk: KazooClient) -> None:
    assert group_store.read_offsets(zk, "g") == {}
    first = {
        TopicPartition("t", 0): CommittedOffset(
            10, leader_epoch=2, metadata="m", commit_timestamp_ms=5
        ),
        TopicPartition("t", 1): CommittedOffset(20),
        TopicPartition("u", 0): CommittedOffset(0),
    }
    group_store.write_offsets(zk, "g", first)
    assert group_store.read_offsets(zk, "g") == first
    group_store.write_offsets(
        zk,
        "g",
        {TopicPartition("t", 0): CommittedOffset(11), TopicPartition("t", 2): CommittedOffset(3)},
    )
    read = group_store.read_offsets(zk, "g")
    assert read[TopicPartition("t", 0)] == CommittedOffset(11)
    assert read[TopicPartition("t", 2)] == CommittedOffset(3)
    assert read[TopicPartition("t", 1)] == CommittedOffset(20)
    data, _ = zk.get("/consumers/g/offsets/t/0")
    assert data.startswith(b'{"version":1,"offset":11,')


def test_odd_group_ids_round_trip(zk: KazooClient) -> None:
    for group in ("a/b", ".", "..", "ünï cøde", "%2F"):
        group_store.write_offsets(zk, group, {TopicPartition("t", 0): CommittedOffset(1)})
        assert group_store.read_offsets(zk, group) == {TopicPartition("t", 0): CommittedOffset(1)}
    assert group_store.list_groups(zk) == sorted(["a/b", ".", "..", "ünï cøde", "%2F"])


def test_more_commits_than_one_transaction_holds(zk: KazooClient) -> None:
    count = group_store.MAX_OPS_PER_TRANSACTION + 7
    commits = {TopicPartition("big", p): CommittedOffset(p) for p in range(count)}
    group_store.write_offsets(zk, "g", commits)
    assert group_store.read_offsets(zk, "g") == commits


def test_delete_and_list(zk: KazooClient) -> None:
    assert group_store.list_groups(zk) == []
    group_store.write_offsets(zk, "g1", {TopicPartition("t", 0): CommittedOffset(1)})
    group_store.write_offsets(zk, "g2", {TopicPartition("t", 0): CommittedOffset(1)})
    assert group_store.list_groups(zk) == ["g1", "g2"]
    assert group_store.delete_group(zk, "g1") is True
    assert group_store.delete_group(zk, "g1") is False
    assert group_store.list_groups(zk) == ["g2"]
    assert group_store.read_offsets(zk, "g1") == {}


def test_garbage_in_a_znode_is_a_typed_error(zk: KazooClient) -> None:
    zk.create("/consumers/g/offsets/t/0", b"not json", makepath=True)
    with pytest.raises(ZooKeeperError, match="/consumers/g/offsets/t/0"):
        group_store.read_offsets(zk, "g")


def test_commits_are_chunked_by_bytes_and_fenced(zk: KazooClient) -> None:
    # 24 KiB per znode (each byte escaped to six): 60 of them are 1.4 MiB, over
    # ZooKeeper's 1 MiB request limit in one multi-op.
    commits = {
        TopicPartition("big", p): CommittedOffset(p, metadata="\x01" * 4096) for p in range(60)
    }
    fence = group_store.claim_group(zk, "g", broker_id=1)
    assert group_store.write_offsets(zk, "g", commits, fence) == {}
    assert group_store.read_offsets(zk, "g") == commits
    newer = group_store.claim_group(zk, "g", broker_id=2)
    assert newer > fence
    with pytest.raises(NotCoordinatorError):
        group_store.write_offsets(zk, "g", {TopicPartition("t", 0): CommittedOffset(1)}, fence)
    assert TopicPartition("t", 0) not in group_store.read_offsets(zk, "g")
    with pytest.raises(InvalidGroupIdError):
        group_store.write_offsets(zk, "g" * 1025, {TopicPartition("t", 0): CommittedOffset(1)})


def test_a_deleted_topics_offsets_are_refused_and_removed(zk: KazooClient) -> None:
    group_store.write_offsets(zk, "g1", {TopicPartition("t", 0): CommittedOffset(1)})
    group_store.write_offsets(
        zk,
        "g2",
        {TopicPartition("t", 1): CommittedOffset(2), TopicPartition("u", 0): CommittedOffset(3)},
    )
    zk.delete(znodes.topic_path("t"))
    assert group_store.missing_topics(zk, ["t", "u", "never"]) == {"t", "never"}
    refused = group_store.write_offsets(
        zk,
        "g2",
        {TopicPartition("t", 0): CommittedOffset(9), TopicPartition("u", 0): CommittedOffset(4)},
    )
    assert list(refused) == [TopicPartition("t", 0)]
    assert isinstance(refused[TopicPartition("t", 0)], UnknownTopicOrPartitionError)
    assert sorted(group_store.delete_topic_offsets(zk, "t")) == ["g1", "g2"]
    assert group_store.read_offsets(zk, "g1") == {}
    assert group_store.read_offsets(zk, "g2") == {TopicPartition("u", 0): CommittedOffset(4)}
    assert group_store.delete_topic_offsets(zk, "t") == []


def test_expired_offsets_and_then_the_group_are_removed(zk: KazooClient) -> None:
    offsets = {
        TopicPartition("t", 0): CommittedOffset(1),
        TopicPartition("u", 0): CommittedOffset(2),
    }
    fence = group_store.claim_group(zk, "g", broker_id=1)
    group_store.write_offsets(zk, "g", offsets, fence)
    assert not group_store.expire_offsets(zk, "g", offsets, {TopicPartition("t", 0)}, fence)
    assert group_store.read_offsets(zk, "g") == {TopicPartition("u", 0): CommittedOffset(2)}
    assert zk.exists("/consumers/g/offsets/t") is None
    remaining = {TopicPartition("u", 0): CommittedOffset(2)}
    with pytest.raises(NotCoordinatorError):
        group_store.expire_offsets(zk, "g", remaining, set(remaining), fence + 1)
    assert group_store.expire_offsets(zk, "g", remaining, set(remaining), fence)
    assert group_store.list_groups(zk) == []
