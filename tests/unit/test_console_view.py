"""The /api/cluster document from plain values: dead brokers still shown, the controller
marked, under-replicated and offline partitions flagged and counted, dead replicas named
and leaders other than the preferred replica flagged."""

from __future__ import annotations

from spark_replica.client import PartitionDescription
from spark_replica.tools.console.cluster_view import BrokerView, cluster_json


def partition(number: int, leader: int, isr: list[int], hw: int = 5) -> PartitionDescription:
    return PartitionDescription(number, leader, 3, [1, 2, 3], isr, hw)


def test_a_healthy_cluster() -> None:
    live = [BrokerView(i, "127.0.0.1", 9000 + i, 9100 + i) for i in (1, 2, 3)]
    document = cluster_json(
        source="zookeeper",
        live=live,
        known={},
        controller=2,
        topics={"t": [partition(0, 1, [1, 2, 3])]},
        error=None,
    )
    assert [(b["id"], b["alive"], b["controller"]) for b in document["brokers"]] == [
        (1, True, False),
        (2, True, True),
        (3, True, False),
    ]
    assert document["brokers"][0]["metrics_url"] == "http://127.0.0.1:9101/metrics"
    assert document["topics"] == [
        {
            "topic": "t",
            "config": None,
            "partitions": [
                {
                    "partition": 0,
                    "leader": 1,
                    "leader_epoch": 3,
                    "replicas": [1, 2, 3],
                    "dead_replicas": [],
                    "preferred_leader": 1,
                    "leader_not_preferred": False,
                    "isr": [1, 2, 3],
                    "high_watermark": 5,
                    "under_replicated": False,
                    "offline": False,
                }
            ],
        }
    ]
    assert document["summary"] == {
        "brokers": 3,
        "brokers_alive": 3,
        "topics": 1,
        "partitions": 1,
        "under_replicated": 0,
        "offline": 0,
        "leader_not_preferred": 0,
    }


def test_a_dead_broker_stays_listed_and_its_partitions_are_flagged() -> None:
    seen = {i: BrokerView(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)}
    document = cluster_json(
        source="bootstrap",
        live=[seen[1], seen[2]],
        known=seen,
        controller=1,
        topics={"t": [partition(0, 1, [1, 2]), partition(1, 3, [3], hw=-1)]},
        error=None,
    )
    dead = document["brokers"][2]
    assert (dead["id"], dead["alive"], dead["host"], dead["metrics_url"]) == (
        3,
        False,
        "127.0.0.1",
        None,
    )
    flags = [(p["under_replicated"], p["offline"]) for p in document["topics"][0]["partitions"]]
    assert flags == [(True, False), (True, True)]
    assert document["topics"][0]["partitions"][1]["high_watermark"] is None
    assert document["summary"]["under_replicated"] == 2
    assert document["summary"]["offline"] == 1


def test_a_replica_never_seen_alive_is_a_dead_broker_without_an_address() -> None:
    document = cluster_json(
        source="zookeeper",
        live=[BrokerView(1, "h", 1)],
        known={},
        controller=None,
        topics={"t": [PartitionDescription(0, -1, 0, [1, 7], [7], -1)]},
        error="topics unavailable: x",
    )
    assert [(b["id"], b["alive"], b["host"]) for b in document["brokers"]] == [
        (1, True, "h"),
        (7, False, None),
    ]
    assert document["topics"][0]["partitions"][0]["leader"] is None
    assert document["error"] == "topics unavailable: x"


def test_dead_replicas_are_named_and_a_moved_leader_is_not_preferred() -> None:
    seen = {i: BrokerView(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)}
    document = cluster_json(
        source="zookeeper",
        live=[seen[2], seen[3]],
        known=seen,
        controller=2,
        topics={"t": [partition(0, 2, [2, 3]), partition(1, 1, [1, 2, 3])]},
        error=None,
    )
    moved, on_preferred = document["topics"][0]["partitions"]
    assert (moved["dead_replicas"], moved["preferred_leader"], moved["leader_not_preferred"]) == (
        [1],
        1,
        True,
    )
    assert on_preferred["leader_not_preferred"] is False
    assert document["summary"]["leader_not_preferred"] == 1


def test_a_partition_without_a_leader_is_not_flagged_as_not_preferred() -> None:
    document = cluster_json(
        source="zookeeper",
        live=[],
        known={},
        controller=None,
        topics={"t": [PartitionDescription(0, -1, 0, [1, 2], [], -1)]},
        error=None,
    )
    shown = document["topics"][0]["partitions"][0]
    assert (shown["dead_replicas"], shown["leader_not_preferred"]) == ([1, 2], False)


def test_each_topic_carries_its_config_overrides_when_known() -> None:
    document = cluster_json(
        source="zookeeper",
        live=[BrokerView(1, "h", 1)],
        known={},
        controller=1,
        topics={"a": [partition(0, 1, [1])], "b": [partition(0, 1, [1])]},
        error=None,
        configs={"a": {"segment.ms": "10", "retention.ms": "5"}},
    )
    assert [(t["topic"], t["config"]) for t in document["topics"]] == [
        ("a", {"retention.ms": "5", "segment.ms": "10"}),
        ("b", {}),
    ]
