"""The cuts each network fault of a chaos schedule makes, on a planned network."""

from __future__ import annotations

import pytest

from spark_replica.tools.netns.topology import Cut, plan_topology
from tests.chaos.partitions import cut_from_clients, plan_cuts
from tests.chaos.schedule import NETWORK_KINDS, FaultKind

TOPOLOGY = plan_topology("t", 7, [1, 2, 3])


def both_ways(a: str, b: str) -> set[Cut]:
    return {Cut(a, b), Cut(b, a)}


def test_an_isolated_broker_is_cut_from_every_host_both_ways() -> None:
    cuts = set(plan_cuts(FaultKind.ISOLATE, TOPOLOGY, 2))
    assert cuts == {
        cut for other in ("clients", "zookeeper", "broker-1", "broker-3")
        for cut in both_ways("broker-2", other)
    }  # fmt: skip


def test_a_broker_cut_from_zookeeper_keeps_everyone_else() -> None:
    assert set(plan_cuts(FaultKind.ZOOKEEPER_CUT, TOPOLOGY, 1)) == both_ways(
        "broker-1", "zookeeper"
    )


def test_a_broker_cut_from_the_clients_keeps_zookeeper_and_the_brokers() -> None:
    assert set(plan_cuts(FaultKind.CLIENTS_CUT, TOPOLOGY, 3)) == both_ways("broker-3", "clients")


def test_the_controller_loses_the_brokers_but_not_zookeeper_or_clients() -> None:
    cuts = set(plan_cuts(FaultKind.CONTROLLER_CUT, TOPOLOGY, 1))
    assert cuts == both_ways("broker-1", "broker-2") | both_ways("broker-1", "broker-3")


def test_a_one_way_cut_drops_only_the_followers_packets_to_the_leader() -> None:
    assert plan_cuts(FaultKind.ONE_WAY_CUT, TOPOLOGY, 3, leader_id=1) == [
        Cut("broker-3", "broker-1")
    ]
    with pytest.raises(ValueError, match="leader other than"):
        plan_cuts(FaultKind.ONE_WAY_CUT, TOPOLOGY, 3, leader_id=3)


def test_only_network_faults_have_cuts() -> None:
    for kind in set(FaultKind) - NETWORK_KINDS:
        with pytest.raises(ValueError, match="not a network fault"):
            plan_cuts(kind, TOPOLOGY, 1)


def test_the_clients_cannot_reach_an_isolated_or_clients_cut_broker_only() -> None:
    assert cut_from_clients(plan_cuts(FaultKind.ISOLATE, TOPOLOGY, 2)) == {"broker-2"}
    assert cut_from_clients(plan_cuts(FaultKind.CLIENTS_CUT, TOPOLOGY, 3)) == {"broker-3"}
    assert cut_from_clients(plan_cuts(FaultKind.ZOOKEEPER_CUT, TOPOLOGY, 1)) == set()
    assert cut_from_clients(plan_cuts(FaultKind.CONTROLLER_CUT, TOPOLOGY, 1)) == set()
