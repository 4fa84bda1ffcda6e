"""The ensemble's pure parts: node planning, zoo.cfg, connect string, `srvr` modes, node
count validation (also at the CLI), and cluster.json with an ensemble recorded."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from spark_replica.errors import ConfigError
from spark_replica.tools.cli import cluster as cluster_cli
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.cluster_dir import ClusterInfo, ZooKeeperNodeEntry
from spark_replica.tools.launcher.ensemble import (
    connect_string,
    parse_mode,
    plan_ensemble,
    render_config,
    validate_node_count,
)
from spark_replica.zk.session import reconnect_retry

ROOT = Path("/data/zk")


def test_plan_gives_each_node_its_ids_ports_and_directory() -> None:
    nodes = plan_ensemble(ROOT, "10.0.0.1", list(range(2000, 2009)))
    assert [(n.myid, n.client_port, n.quorum_port, n.election_port) for n in nodes] == [
        (1, 2000, 2001, 2002),
        (2, 2003, 2004, 2005),
        (3, 2006, 2007, 2008),
    ]
    assert [n.dir for n in nodes] == [ROOT / "node-1", ROOT / "node-2", ROOT / "node-3"]
    assert connect_string(nodes) == "10.0.0.1:2000,10.0.0.1:2003,10.0.0.1:2006"


def test_plan_refuses_repeated_ports_and_even_counts() -> None:
    with pytest.raises(ConfigError, match="distinct"):
        plan_ensemble(ROOT, "h", [1, 2, 3, 1, 5, 6, 7, 8, 9])
    with pytest.raises(ConfigError, match="odd"):
        plan_ensemble(ROOT, "h", list(range(10, 16)))


def test_config_names_every_member_and_the_node_own_ports() -> None:
    nodes = plan_ensemble(ROOT, "127.0.0.1", list(range(3000, 3009)))
    lines = render_config(nodes[1], nodes, tick_ms=200).splitlines()
    assert "tickTime=200" in lines
    assert "clientPort=3003" in lines
    assert "clientPortAddress=127.0.0.1" in lines
    assert f"dataDir={ROOT / 'node-2' / 'data'}" in lines
    assert "minSessionTimeout=400" in lines
    assert "admin.enableServer=false" in lines
    assert [line for line in lines if line.startswith("server.")] == [
        "server.1=127.0.0.1:3001:3002",
        "server.2=127.0.0.1:3004:3005",
        "server.3=127.0.0.1:3007:3008",
    ]
    whitelist = next(line for line in lines if line.startswith("4lw.commands.whitelist="))
    assert "srvr" in whitelist and "mntr" in whitelist


@pytest.mark.parametrize(
    ("reply", "mode"),
    [
        (
            "Zookeeper version: 3.9.5\nLatency min/avg/max: 0/0.0/0\nMode: leader\nNode count: 5\n",
            "leader",
        ),
        ("Zookeeper version: 3.9.5\nMode: follower\n", "follower"),
        ("Mode: standalone\n", "standalone"),
        ("This ZooKeeper instance is not currently serving requests\n", None),
        ("", None),
    ],
)
def test_mode_is_read_from_the_srvr_reply(reply: str, mode: str | None) -> None:
    assert parse_mode(reply) == mode


@pytest.mark.parametrize("count", [0, -1, 2, 4, 8, 9])
def test_node_counts_that_are_not_odd_or_out_of_range_are_refused(count: int) -> None:
    with pytest.raises(ConfigError, match="--zookeeper-nodes must be an odd number from 1 to 7"):
        validate_node_count(count)


@pytest.mark.parametrize("count", [1, 3, 5, 7])
def test_odd_node_counts_up_to_seven_are_accepted(count: int) -> None:
    validate_node_count(count)


def up_args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cluster_cli.add_parsers(parser.add_subparsers(dest="command"))
    return parser.parse_args(["up", "--dir", str(tmp_path / "cluster"), *argv])


def test_up_refuses_an_even_ensemble_before_starting_anything(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not 2"):
        cluster_cli.run_up(up_args(tmp_path, "--zookeeper-nodes", "2"))
    assert not (tmp_path / "cluster").exists()


def test_up_refuses_an_ensemble_beside_an_external_zookeeper(tmp_path: Path) -> None:
    args = up_args(tmp_path, "--zookeeper-nodes", "3", "--zookeeper", "127.0.0.1:2181")
    with pytest.raises(ConfigError, match="--zookeeper"):
        cluster_cli.run_up(args)


def test_cluster_file_keeps_the_ensemble_nodes(tmp_path: Path) -> None:
    nodes = [
        ZooKeeperNodeEntry(i, 4000 + i, 5000 + i, 6000 + i, f"/zk/node-{i}", None)
        for i in (1, 2, 3)
    ]
    info = ClusterInfo(
        "127.0.0.1:4001,127.0.0.1:4002,127.0.0.1:4003", None, [], zookeeper_nodes=nodes
    )
    cluster_dir.save(tmp_path, info)
    loaded = cluster_dir.load(tmp_path)
    assert loaded.zookeeper_nodes == nodes
    assert loaded.processes() == nodes
    assert loaded.running_processes() == []


def test_cluster_file_without_an_ensemble_reads_as_before(tmp_path: Path) -> None:
    cluster_dir.save(tmp_path, ClusterInfo("127.0.0.1:2181", None, []))
    path = tmp_path / cluster_dir.CLUSTER_FILE
    document = json.loads(path.read_text())
    del document["zookeeper_nodes"]
    path.write_text(json.dumps(document))
    assert cluster_dir.load(tmp_path).zookeeper_nodes == []


def test_reconnecting_never_waits_long_enough_to_outlive_the_session() -> None:
    for session_timeout_s in (1.0, 3.0, 10.0, 30.0):
        retry = reconnect_retry(session_timeout_s)
        assert retry.max_tries == -1
        assert retry.max_delay * (1 + retry.max_jitter) < session_timeout_s / 2
