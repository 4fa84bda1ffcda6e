"""Where `replog up` puts each listener: fixed defaults that the docs' examples use, all
moved together by --port-base, and a base that would leave the usable range refused."""

from __future__ import annotations

import pytest

from spark_replica.errors import ConfigError
from spark_replica.tools.cli import cluster_ports
from spark_replica.tools.launcher.cluster_dir import (
    BrokerEntry,
    ClusterInfo,
    EmbeddedZooKeeperEntry,
)
from spark_replica.tools.launcher.port_plan import PortPlan


def test_the_defaults_are_the_ports_kafka_users_know() -> None:
    plan = PortPlan()
    assert [plan.replog(i) for i in (1, 2, 3)] == [9092, 9093, 9094]
    assert [plan.kafka(i) for i in (1, 2, 3)] == [19092, 19093, 19094]
    assert [plan.metrics(i) for i in (1, 2, 3)] == [9404, 9405, 9406]
    assert plan.zookeeper() == 2181


def test_a_base_moves_every_port_together() -> None:
    plan = PortPlan(20_000, brokers=2, zookeeper_nodes=3)
    assert (plan.replog(2), plan.kafka(2), plan.metrics(2)) == (20_001, 30_001, 20_313)
    assert plan.ensemble_ports() == [
        *(13_089, 13_796, 14_796),
        *(13_090, 13_797, 14_797),
        *(13_091, 13_798, 14_798),
    ]


def test_an_ensemble_at_the_default_base_uses_zookeepers_own_ports() -> None:
    assert PortPlan(zookeeper_nodes=3).ensemble_ports()[:3] == [2181, 2888, 3888]


@pytest.mark.parametrize(
    ("base", "brokers"), [(7934, 3), (0, 1), (55_536, 1), (55_534, 3), (-1, 1)]
)
def test_a_base_that_leaves_the_usable_ports_is_refused(base: int, brokers: int) -> None:
    with pytest.raises(ConfigError, match="--port-base must be from 7935 to"):
        PortPlan(base, brokers)


def test_the_range_edges_are_accepted() -> None:
    assert PortPlan(7935, 1).zookeeper() == 1024
    assert PortPlan(55_533, 3).kafka(3) == 65_535


def test_too_many_brokers_for_the_metrics_ports_is_refused() -> None:
    with pytest.raises(ConfigError, match="--brokers must be from 1 to 312"):
        PortPlan(brokers=313)


def _cluster(kafka: bool, metrics: bool) -> ClusterInfo:
    brokers = [BrokerEntry(i, "127.0.0.1", 0, None, f"broker-{i}", 0, 0) for i in (1, 2)]
    zookeeper = EmbeddedZooKeeperEntry(0, "zookeeper", None)
    return ClusterInfo("", zookeeper, brokers, kafka=kafka, metrics=metrics)


def test_a_planned_cluster_names_every_port_it_will_listen_on() -> None:
    info = _cluster(kafka=True, metrics=False)
    cluster_ports.planned(info, PortPlan(12_000, brokers=2))
    assert cluster_ports.named_ports(info) == [
        (5089, "ZooKeeper"),
        (12_000, "broker 1's replog listener"),
        (22_000, "broker 1's Kafka listener"),
        (12_001, "broker 2's replog listener"),
        (22_001, "broker 2's Kafka listener"),
    ]
