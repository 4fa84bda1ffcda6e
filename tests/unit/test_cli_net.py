"""`replog net` and `up --netns` without a network: which cuts a command means, how cuts
are described, what cluster.json keeps of the network, and what a teardown removes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_replica.errors import ConfigError
from spark_replica.tools.cli import hosts
from spark_replica.tools.cli.main import main
from spark_replica.tools.cli.net import planned_cuts
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.cluster_dir import (
    BrokerEntry,
    ClusterInfo,
    EmbeddedZooKeeperEntry,
    NetworkEntry,
)
from spark_replica.tools.netns.topology import Cut, plan_topology

NET = plan_topology("ab12", 7, [1, 2, 3])


def test_a_cut_between_two_hosts_is_both_directions_unless_one_way() -> None:
    assert planned_cuts(NET, "1", "clients", False, False) == [
        Cut("broker-1", "clients"),
        Cut("clients", "broker-1"),
    ]
    assert planned_cuts(NET, "broker-2", "zookeeper", False, True) == [Cut("broker-2", "zookeeper")]


def test_a_cut_from_all_is_every_other_host_clients_included() -> None:
    cuts = planned_cuts(NET, "3", None, True, True)
    assert [c.target for c in cuts] == ["clients", "zookeeper", "broker-1", "broker-2"]
    assert {c.source for c in cuts} == {"broker-3"}


@pytest.mark.parametrize(
    ("a", "b", "every", "error"),
    [
        ("1", "1", False, "from itself"),
        ("1", "broker-1", False, "from itself"),
        ("1", "9", False, "no host broker-9"),
        ("kafka", "1", False, "is not a host"),
        ("1", None, False, "or pass --all"),
        ("1", "2", True, "or pass --all"),
        ("9", None, True, "no host broker-9"),
    ],
)
def test_bad_cuts_are_refused(a: str, b: str | None, every: bool, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        planned_cuts(NET, a, b, every, False)


def test_cuts_are_described_as_links_or_directions_in_the_order_made() -> None:
    cuts = [["broker-1", "clients"], ["clients", "broker-1"], ["broker-2", "zookeeper"]]
    assert hosts.describe_cuts(cuts) == "broker-1 <-> clients, broker-2 -> zookeeper"
    assert hosts.describe_cuts([]) == "none"


def test_cluster_json_keeps_the_network_and_its_cuts(tmp_path: Path) -> None:
    broker = BrokerEntry(1, "198.18.7.11", 9092, None, str(tmp_path / "b1"))
    info = ClusterInfo("198.18.7.2:2181", None, [broker])
    info.network = NetworkEntry(NET.to_json(), [["broker-1", "clients"]])
    cluster_dir.save(tmp_path, info)
    loaded = cluster_dir.load(tmp_path)
    assert loaded.network is not None
    assert loaded.network.plan() == NET
    assert loaded.network.cuts == [["broker-1", "clients"]]


def test_a_cluster_without_a_network_has_nothing_to_cut(tmp_path: Path) -> None:
    info = ClusterInfo("127.0.0.1:2181", None, [])
    cluster_dir.save(tmp_path, info)
    loaded = cluster_dir.load(tmp_path)
    assert loaded.network is None and hosts.network_view(loaded) is None
    assert hosts.exec_prefix(loaded, 1) == []
    with pytest.raises(ConfigError, match="not started with --netns"):
        hosts.live_topology(loaded, tmp_path)


def test_a_new_netns_cluster_listens_on_the_usual_ports_on_every_host(tmp_path: Path) -> None:
    info = ClusterInfo("", None, [BrokerEntry(1, "127.0.0.1", 40001, None, "b1", 40002, -1)])
    hosts.plan(info, True, tmp_path, fresh=True)
    assert info.network == NetworkEntry()
    assert (info.brokers[0].port, info.brokers[0].kafka_port) == (9092, 9093)


def test_a_recorded_cluster_without_netns_is_not_moved_onto_hosts(tmp_path: Path) -> None:
    info = ClusterInfo("127.0.0.1:2181", None, [])
    with pytest.raises(ConfigError, match="set up without --netns"):
        hosts.plan(info, True, tmp_path, fresh=False)


def test_teardown_deletes_each_link_before_its_namespace() -> None:
    """A deleted namespace is freed only once nothing holds it, which can be long after:
    its link would stay on the bridge's side until then, unless deleted itself."""
    commands = NET.teardown_commands()
    for host in NET.hosts:
        if host.namespace is None:
            continue
        link = commands.index(["ip", "link", "del", str(host.outer_link)])
        assert link < commands.index(["ip", "netns", "del", host.namespace])
    assert commands[-1] == ["ip", "link", "del", NET.bridge]


def test_status_of_a_stopped_cluster_without_hosts_or_ensemble(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    embedded = EmbeddedZooKeeperEntry(2181, str(tmp_path / "zookeeper"), None)
    broker = BrokerEntry(1, "127.0.0.1", 9092, None, str(tmp_path / "b1"))
    cluster_dir.save(tmp_path, ClusterInfo("127.0.0.1:2181", embedded, [broker]))
    assert main(["status", "--json", "--dir", str(tmp_path)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert "network" not in status and status["brokers"][0]["alive"] is False


def test_net_on_a_cluster_without_hosts_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster_dir.save(tmp_path, ClusterInfo("127.0.0.1:2181", None, []))
    assert main(["net", "cut", "1", "2", "--dir", str(tmp_path)]) == 2
    assert "was not started with --netns" in capsys.readouterr().err
