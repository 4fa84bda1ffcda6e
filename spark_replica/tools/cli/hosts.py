"""A local cluster on hosts of its own (`replog up --netns`): ZooKeeper and each broker in
a network namespace with its own address on a bridge (spark_replica.tools.netns), while the
`replog` commands run on the machine's side of the bridge, the "clients" host.

The network lives as long as the cluster's processes: `up` makes it before anything
starts and removes it again if the start fails; `down` heals its cuts (a broker cut off
would only wait out its shutdown timeouts) and removes it once every process is gone.
Its plan and the cuts in force are recorded in cluster.json, so that every other command
finds the hosts at their addresses.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spark_replica.errors import ConfigError, NetworkSetupError
from spark_replica.tools.launcher.cluster_dir import (
    ClusterInfo,
    EmbeddedZooKeeperEntry,
    NetworkEntry,
)
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.tools.netns import network
from spark_replica.tools.netns.topology import (
    PREFIX_LENGTH,
    SUBNET_PREFIX,
    ZOOKEEPER,
    Topology,
    broker_host,
)

# Every host has its ports to itself, so each process listens on the usual ones.
REPLOG_PORT = 9092
KAFKA_PORT = 9093
METRICS_PORT = 9094
ZOOKEEPER_PORT = 2181


def check_flags(args: argparse.Namespace) -> None:
    """Refuse `up --netns` with what cannot run on hosts of their own, and on a machine
    that cannot make namespaces, before anything is created."""
    if args.zookeeper is not None:
        raise ConfigError("--netns runs ZooKeeper on a host of its own: leave out --zookeeper")
    if args.port_base is not None:
        raise ConfigError(
            "--netns gives every host its own address and the usual ports: leave out --port-base"
        )
    if args.zookeeper_nodes is not None and args.zookeeper_nodes > 1:
        raise ConfigError("--netns runs one ZooKeeper node: leave out --zookeeper-nodes")
    network.require()


def plan(info: ClusterInfo, netns: bool, directory: Path, fresh: bool) -> None:
    """Put a new cluster asked for with --netns on hosts; a recorded one stays as it was."""
    if netns and info.network is None:
        if not fresh:
            raise ConfigError(
                f"the cluster in {directory} was set up without --netns: "
                "leave out --netns or use another --dir"
            )
        info.network = NetworkEntry()
    if info.network is None:
        return
    for broker in info.brokers:
        broker.port = REPLOG_PORT
        broker.kafka_port = KAFKA_PORT if info.kafka else -1
        broker.metrics_port = METRICS_PORT if info.metrics else -1
    if info.embedded_zookeeper is not None:
        info.embedded_zookeeper.port = ZOOKEEPER_PORT


@contextlib.contextmanager
def network_for(info: ClusterInfo) -> Iterator[None]:
    """Make the cluster's network (if it has one) and give each broker its address; remove
    the network again if what runs inside fails."""
    entry = info.network
    if entry is None:
        yield
        return
    recorded = entry.plan()
    topology = network.create_network(
        [b.id for b in info.brokers],
        preferred_subnet=None if recorded is None else recorded.subnet,
    )
    try:
        entry.topology = topology.to_json()
        entry.cuts = []
        for broker in info.brokers:
            broker.host = topology.address(broker_host(broker.id))
        yield
    except BaseException:
        network.destroy_network(topology)
        raise


def embedded_zookeeper(
    info: ClusterInfo, entry: EmbeddedZooKeeperEntry, local_host: str
) -> EmbeddedZooKeeper:
    topology = _topology(info)
    if topology is None:
        return EmbeddedZooKeeper(entry.port, Path(entry.dir), local_host)
    return EmbeddedZooKeeper(
        entry.port,
        Path(entry.dir),
        topology.address(ZOOKEEPER),
        command_prefix=topology.exec_prefix(ZOOKEEPER),
    )


def exec_prefix(info: ClusterInfo, broker_id: int) -> list[str]:
    """What runs broker `broker_id` on its host (nothing when the cluster has none)."""
    topology = _topology(info)
    return [] if topology is None else topology.exec_prefix(broker_host(broker_id))


def heal_for_shutdown(info: ClusterInfo) -> None:
    topology = _topology(info)
    if topology is not None and info.network is not None and info.network.cuts:
        network.heal(topology)
        info.network.cuts = []


def remove_network(info: ClusterInfo) -> str | None:
    """Remove the network once its processes are gone: what `down` says of it, None when
    there was none to remove."""
    topology = _topology(info)
    if topology is None or info.network is None:
        return None
    was_up = is_up(topology)
    network.destroy_network(topology)
    left = set(topology.namespaces()) & set(network.leftover_namespaces())
    if left:
        raise NetworkSetupError(
            f"could not remove the namespaces {', '.join(sorted(left))}: run `replog down` as root"
        )
    info.network.cuts = []
    if not was_up:
        return None
    count = len(topology.namespaces())
    return f"Removed the network: bridge {topology.bridge} and {count} namespaces."


def _topology(info: ClusterInfo) -> Topology | None:
    return None if info.network is None else info.network.plan()


def is_up(topology: Topology) -> bool:
    return set(topology.namespaces()) <= set(network.leftover_namespaces())


def live_topology(info: ClusterInfo, directory: Path) -> Topology:
    """The network `replog net` acts on; a clear error when there is none, or it is down."""
    if info.network is None:
        raise ConfigError(
            f"the cluster in {directory} was not started with --netns: its processes share "
            "this machine's network, so there is no link to cut or heal"
        )
    topology = info.network.plan()
    if topology is None or not is_up(topology):
        raise ConfigError(
            f"the network of the cluster in {directory} is not up: "
            f"run `replog up --dir {directory}`"
        )
    return topology


def network_view(info: ClusterInfo) -> dict[str, Any] | None:
    """The network as `status --json` and `net show --json` give it (None: no network)."""
    if info.network is None:
        return None
    topology = info.network.plan()
    if topology is None:
        return {"subnet": None, "bridge": None, "up": False, "hosts": [], "cuts": []}
    return {
        "subnet": f"{SUBNET_PREFIX}.{topology.subnet}.0/{PREFIX_LENGTH}",
        "bridge": topology.bridge,
        "up": is_up(topology),
        "hosts": [
            {"name": h.name, "address": h.address, "namespace": h.namespace} for h in topology.hosts
        ],
        "cuts": [list(cut) for cut in info.network.cuts],
    }


def network_line(view: dict[str, Any]) -> str:
    """One line for `status`: where the hosts are and what is cut."""
    if view["subnet"] is None:
        return "not made yet"
    state = "up" if view["up"] else "down"
    cuts = describe_cuts(view["cuts"])
    return f"{view['subnet']} on bridge {view['bridge']} ({state}); cuts: {cuts}"


def describe_cuts(cuts: list[list[str]]) -> str:
    """`a <-> b` for a link cut both ways, `a -> b` for one direction, in the order cut."""
    directions = [(source, target) for source, target in cuts]
    described: list[str] = []
    for source, target in directions:
        if (target, source) in directions:
            if f"{target} <-> {source}" not in described:
                described.append(f"{source} <-> {target}")
        else:
            described.append(f"{source} -> {target}")
    return ", ".join(described) if described else "none"
