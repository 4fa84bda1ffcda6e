"""Which links a network fault of a chaos schedule cuts, on the network of a run.

Pure: a fault kind and the brokers it strikes give the one-direction cuts to apply
(spark_replica.tools.netns.topology.Cut); the cluster applies them and heals them. Kept apart
from the schedule, which names roles, because who holds a role is only known when the
fault fires.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_replica.tools.netns.topology import (
    CLIENTS,
    ZOOKEEPER,
    Cut,
    Topology,
    broker_host,
    cuts_between,
)
from tests.chaos.schedule import FaultKind


def plan_cuts(
    kind: FaultKind, topology: Topology, broker_id: int, leader_id: int | None = None
) -> list[Cut]:
    """The cuts of a fault on `broker_id`; a one-way cut drops its packets to `leader_id`."""
    broker = broker_host(broker_id)
    if kind is FaultKind.ISOLATE:
        return topology.cuts_from_all(broker)
    if kind is FaultKind.ZOOKEEPER_CUT:
        return cuts_between(broker, ZOOKEEPER)
    if kind is FaultKind.CLIENTS_CUT:
        return cuts_between(broker, CLIENTS)
    if kind is FaultKind.CONTROLLER_CUT:
        others = [name for name in _brokers(topology) if name != broker]
        return [cut for other in others for cut in cuts_between(broker, other)]
    if kind is FaultKind.ONE_WAY_CUT:
        if leader_id is None or leader_id == broker_id:
            raise ValueError(f"a one-way cut needs a leader other than broker {broker_id}")
        return cuts_between(broker, broker_host(leader_id), one_way=True)
    raise ValueError(f"{kind} is not a network fault")


def cut_from_clients(cuts: Iterable[Cut]) -> set[str]:
    """The hosts the clients cannot reach (or hear from) under `cuts`."""
    hosts: set[str] = set()
    for cut in cuts:
        if cut.source == CLIENTS:
            hosts.add(cut.target)
        elif cut.target == CLIENTS:
            hosts.add(cut.source)
    return hosts


def _brokers(topology: Topology) -> list[str]:
    return [name for name in topology.names() if name not in (CLIENTS, ZOOKEEPER)]
