"""Altering topic configs without ZooKeeper: validation, the notification codec, and how a
broker applies a new config to live partitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.log import Log, LogConfig
from brokerd.replication.replica_manager import ReplicaManager
from brokerd.replication.topic_configs import change_sequence
from spark_replica.errors import ConfigError, ZooKeeperError
from spark_replica.records import build_batch
from spark_replica.tools.cli.configs import split_items
from spark_replica.topics import TopicPartition
from spark_replica.zk.topic_store import merge_topic_config
from spark_replica.zk.znodes import ConfigChangeNotification

BATCH = build_batch(["x" * 200], timestamps=[0])


def test_merge_sets_and_deletes() -> None:
    current = {"retention.ms": "1000", "segment.bytes": "2048"}
    merged = merge_topic_config(current, {"segment.bytes": "4096"}, ["retention.ms"])
    assert merged == {"segment.bytes": "4096"}
    assert current == {"retention.ms": "1000", "segment.bytes": "2048"}, "input untouched"
    assert merge_topic_config({}, {}, ["segment.ms"]) == {}, "deleting an unset key is a no-op"


@pytest.mark.parametrize(
    ("to_set", "to_delete", "named"),
    [
        ({"retention.msx": "1"}, [], "retention.msx"),
        ({"retention.ms": "soon"}, [], "retention.ms"),
        ({"segment.bytes": "10"}, [], "segment.bytes"),
        ({"min.insync.replicas": "0"}, [], "min.insync.replicas"),
        ({"unclean.leader.election.enable": "yes"}, [], "unclean.leader.election.enable"),
        ({}, ["no.such.key"], "no.such.key"),
        ({"retention.ms": "1"}, ["retention.ms"], "retention.ms"),
    ],
)
def test_merge_refuses_bad_input_naming_the_key(
    to_set: dict[str, str], to_delete: list[str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        merge_topic_config({}, to_set, to_delete)


def test_merge_refuses_an_empty_alteration() -> None:
    with pytest.raises(ConfigError, match="nothing to alter"):
        merge_topic_config({"retention.ms": "1"}, {}, [])


def test_config_change_notification_round_trips_in_kafkas_layout() -> None:
    notification = ConfigChangeNotification.for_topic("orders")
    assert notification.encode() == b'{"version":2,"entity_path":"topics/orders"}'
    decoded = ConfigChangeNotification.decode("/p", notification.encode())
    assert decoded.topic == "orders"
    assert ConfigChangeNotification("brokers/1").topic is None
    with pytest.raises(ZooKeeperError, match="/p"):
        ConfigChangeNotification.decode("/p", b'{"version":1,"entity_path":"topics/a"}')


def test_change_sequence_and_cli_item_splitting() -> None:
    assert change_sequence("config_change_0000000042") == 42
    assert change_sequence("lock") is None
    assert change_sequence("config_change_x") is None
    assert split_items(["a=1,b=2", " c=3 ", ""]) == ["a=1", "b=2", "c=3"]


def test_update_config_rolls_at_the_new_segment_size(tmp_path: Path) -> None:
    log = Log.open(tmp_path, LogConfig(segment_bytes=1024**2), now_ms=0)
    for _ in range(5):
        log.append(BATCH, assign_offsets=True, now_ms=0)
    assert log.segment_count == 1
    log.update_config(LogConfig(segment_bytes=2 * len(BATCH)))
    for _ in range(4):
        log.append(BATCH, assign_offsets=True, now_ms=0)
    assert log.segment_count == 3, "the big segment rolls at once, then every second batch"
    log.close()


def test_apply_topic_config_changes_only_that_topics_partitions(tmp_path: Path) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    orders = [manager.ensure_partition(TopicPartition("orders", p), {}, 0) for p in (0, 1)]
    other = manager.ensure_partition(TopicPartition("other", 0), {}, 0)
    for partition in [*orders, other]:
        partition.log.append(BATCH, assign_offsets=True, now_ms=0)
    applied = manager.apply_topic_config(
        "orders", {"min.insync.replicas": "2", "retention.ms": "10"}, now_ms=0
    )
    assert applied == 2
    assert [p.min_insync_replicas for p in orders] == [2, 2]
    assert other.min_insync_replicas == 1
    manager.delete_expired_segments(now_ms=1_000)
    assert [p.log.log_start_offset for p in orders] == [1, 1], "retention.ms=10 applied"
    assert other.log.log_start_offset == 0, "the broker default still applies"
    manager.ensure_partition(orders[0].tp, {}, 0)
    assert orders[0].min_insync_replicas == 2, "a later LeaderAndIsr does not undo it"
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        manager.apply_topic_config("orders", {"segment.bytes": "1"}, now_ms=0)
    assert [p.min_insync_replicas for p in orders] == [2, 2], "an invalid config changes nothing"
    manager.close()
