"""`replog up --netns`, `replog net` and `replog down` as a user runs them: a cluster on
hosts of its own that every other command reaches through the bridge, a broker cut off
and healed, and nothing left behind (namespace, bridge or process) after `down`."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.netns import network
from tests.support import replog

pytestmark = pytest.mark.slow

# The cut broker's ZooKeeper session expires quickly, so that heal finds it re-registering.
SESSION_TIMEOUT = "zookeeper.session.timeout.ms=3000"


def ok(*args: str, stdin: bytes = b"") -> str:
    completed = replog(*args, stdin=stdin)
    assert completed.returncode == 0, completed.stderr.decode()
    return completed.stdout.decode()


@contextlib.contextmanager
def cluster_removed_afterwards(directory: Path) -> Iterator[None]:
    """`replog down` whatever the test did; should even that fail, remove the network
    this cluster recorded (and only it) directly."""
    try:
        yield
    finally:
        replog("down", "--dir", str(directory))
        if cluster_dir.exists(directory):
            recorded = cluster_dir.load(directory).network
            topology = None if recorded is None else recorded.plan()
            if topology is not None:
                network.destroy_network(topology)


def test_a_cluster_on_hosts_of_its_own_through_the_cli(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    d = str(directory)
    with cluster_removed_afterwards(directory):
        ok("up", "--brokers", "3", "--netns", "--override", SESSION_TIMEOUT, "--dir", d)
        status: dict[str, Any] = json.loads(ok("status", "--json", "--dir", d))
        assert [b["alive"] for b in status["brokers"]] == [True, True, True]
        assert all(b["host"].startswith("198.18.") for b in status["brokers"])
        assert status["zookeeper"].startswith("198.18.")
        hosts = status["network"]["hosts"]
        namespaces = [h["namespace"] for h in hosts if h["namespace"] is not None]
        bridge = status["network"]["bridge"]
        info = cluster_dir.load(directory)
        processes = info.processes()
        assert all(p.running() for p in processes) and len(processes) == 4

        # Broker 3 alone holds a partition; its address is the last one tried to bootstrap.
        ok("topics", "create", "solo", "--partitions", "3", "--dir", d)
        described = json.loads(ok("topics", "describe", "solo", "--json", "--dir", d))
        partition = next(p for p in described[0]["partitions"] if p["leader"] == 3)
        on_3 = ["solo", "--partition", str(partition["partition"]), "--dir", d]
        ok("produce", *on_3, stdin=b"before\n")

        ok("net", "cut", "3", "--all", "--dir", d)
        shown = json.loads(ok("net", "show", "--json", "--dir", d))
        assert ["broker-3", "clients"] in shown["cuts"] and len(shown["cuts"]) == 8
        unreachable = replog("produce", *on_3, "--delivery-timeout-ms", "2000", stdin=b"lost\n")
        assert unreachable.returncode == 1
        assert b"0 records acknowledged" in unreachable.stderr

        ok("net", "heal", "--dir", d)
        assert json.loads(ok("net", "show", "--json", "--dir", d))["cuts"] == []
        ok("produce", *on_3, stdin=b"after\n")
        consumed = ok(
            "consume", *on_3, "--offset", "earliest", "--max-records", "2", "--timeout", "30"
        )
        assert consumed.split() == ["before", "after"]

        assert "Removed the network" in ok("down", "--dir", d)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert not set(namespaces) & {line.split()[0] for line in listed.stdout.splitlines()}
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    assert not [line for line in links.stdout.splitlines() if bridge.removesuffix("br") in line]
    assert not [p.pid for p in processes if p.running()]
