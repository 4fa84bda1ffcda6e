"""Offsets an earlier replog kept in ZooKeeper, read back from a real ZooKeeper as the
migration to the offsets topic reads them: listed, read (odd group ids included) and
deleted; garbage in a znode is a typed error."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from spark_replica.errors import ZooKeeperError
from spark_replica.topics import TopicPartition
from spark_replica.zk import group_store
from spark_replica.zk.group_store import CommittedOffset

pytestmark = pytest.mark.slow


def plant(zk: KazooClient, group_id: str, tp: TopicPartition, committed: CommittedOffset) -> None:
    """Write an offset as the earlier version did."""
    value = {
        "version": 1,
        "offset": committed.offset,
        "leader_epoch": committed.leader_epoch,
        "metadata": committed.metadata,
        "commit_timestamp": committed.commit_timestamp_ms,
    }
    zk.create(group_store.offset_path(group_id, tp), json.dumps(value).encode(), makepath=True)


def test_offsets_are_read_back_for_odd_group_ids(zk: KazooClient) -> None:
    assert group_store.read_offsets(zk, "g") == {}
    groups = ["a/b", ".", "..", "ünï cøde", "%2F"]
    for group in groups:
        plant(zk, group, TopicPartition("t", 0), CommittedOffset(1, 3, "m", 99))
        assert group_store.read_offsets(zk, group) == {
            TopicPartition("t", 0): CommittedOffset(1, 3, "m", 99)
        }
    assert group_store.list_groups(zk) == sorted(groups)


def test_delete_and_list(zk: KazooClient) -> None:
    assert group_store.list_groups(zk) == []
    plant(zk, "g1", TopicPartition("t", 0), CommittedOffset(1))
    plant(zk, "g2", TopicPartition("t", 0), CommittedOffset(1))
    assert group_store.list_groups(zk) == ["g1", "g2"]
    assert group_store.delete_group(zk, "g1") is True
    assert group_store.delete_group(zk, "g1") is False
    assert group_store.list_groups(zk) == ["g2"]
    assert group_store.read_offsets(zk, "g1") == {}


def test_garbage_in_a_znode_is_a_typed_error(zk: KazooClient) -> None:
    zk.create(group_store.offset_path("g", TopicPartition("t", 0)), b"{not json", makepath=True)
    with pytest.raises(ZooKeeperError, match="/consumers/g/offsets/t/0"):
        group_store.read_offsets(zk, "g")
