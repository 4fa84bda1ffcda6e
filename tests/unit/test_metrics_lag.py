"""Lag, from plain values: a follower's behind its leader, a group's behind the high
watermark, and the gauges the scrape-time collector makes of them."""

from __future__ import annotations

from pathlib import Path

from brokerd.broker_gauges import BrokerStateCollector
from brokerd.config.broker import BrokerConfig
from brokerd.groups.remote_watermarks import by_leader
from brokerd.metrics.group_lag import GroupPartitionOffsets, group_partition_offsets
from brokerd.replication.replica_fetcher import (
    FollowedPartition,
    ReplicaFetcher,
    ReplicaFetcherManager,
)
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.topics import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
OTHER = TopicPartition("u", 0)


def test_group_lag_is_the_high_watermark_minus_the_commit_where_it_is_known() -> None:
    high_watermarks = {TP0: 10, TP1: 4}
    rows = group_partition_offsets({"g2": {OTHER: 3}, "g1": {TP1: 7, TP0: 6}}, high_watermarks.get)
    assert rows == [
        GroupPartitionOffsets("g1", TP0, 6, 4),
        GroupPartitionOffsets("g1", TP1, 7, 0),  # a follower's HW behind the commit
        GroupPartitionOffsets("g2", OTHER, 3, None),  # not hosted here: no lag
    ]
    assert group_partition_offsets({}, high_watermarks.get) == []


def test_a_followed_partition_lags_by_the_leaders_end_minus_its_own(tmp_path: Path) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    followed = manager.ensure_partition(TP1, {}, now_ms=0)
    followed.make_follower(2, 1, [2, 1], 1)
    fetchers = ReplicaFetcherManager(1)
    fetcher = fetchers.fetchers[2] = ReplicaFetcher(1, 2, ("h", 2))
    fetcher.partitions[TP1] = FollowedPartition(followed, needs_truncation=False)
    assert fetchers.lags() == {}  # the leader has not answered yet
    fetcher.partitions[TP1].leader_log_end_offset = 25
    assert fetchers.lags() == {TP1: 25}

    metrics = manager.metrics
    metrics.registry.register(
        BrokerStateCollector(manager, fetchers, lambda: None, lambda: "connected")
    )
    sample = metrics.registry.get_sample_value
    labels = {"topic": "t", "partition": "1"}
    assert sample("kafka_server_fetcherlagmetrics_consumerlag", labels) == 25
    assert sample("kafka_server_replicafetchermanager_maxlag", {}) == 25
    manager.close()


def test_partitions_hosted_elsewhere_are_asked_of_their_leader_once_each() -> None:
    leaders = {TP0: 2, TP1: 3, OTHER: -1}  # u-0 has no leader now: not asked
    assert by_leader([TP1, TP0, TP1, OTHER], leaders) == {2: [TP0], 3: [TP1]}
    assert by_leader([TopicPartition("gone", 0)], leaders) == {}
