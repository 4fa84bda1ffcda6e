"""Committed offsets in a real ZooKeeper: written, read back, listed and deleted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from spark_replica.errors import ZooKeeperError
from spark_replica.topics import TopicPartition
from spark_replica.zk import group_store
from spark_replica.zk.group_store import CommittedOffset
from spark_replica.zk.session import connect

pytestmark = pytest.mark.slow


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    client = connect(zk_connect)
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
