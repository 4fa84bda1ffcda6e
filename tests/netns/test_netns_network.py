"""The network of separate hosts itself: brokers in namespaces of their own serve the
clients through the bridge, a cut drops traffic silently (the client times out, it is not
refused), and healing restores it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spark_replica.tools.netns import network
from tests.support import consume_all, create, produce, produce_acks_all, rows_of, run
from tests.support_netns import NetnsCluster

pytestmark = pytest.mark.slow


def test_cut_and_heal_between_clients_and_a_broker(
    netns_cluster: Callable[..., NetnsCluster],
) -> None:
    cluster = netns_cluster(1)
    run(create(cluster.bootstrap, "hosts", rf=1))
    run(produce(cluster.bootstrap, "hosts", ["before"]))
    assert cluster.broker(1).address.startswith("198.18.")

    cluster.cut("clients", 1)
    assert not run(produce_acks_all(cluster.bootstrap, "hosts", 0))

    cluster.heal()
    run(produce(cluster.bootstrap, "hosts", ["after"]))
    values = [row["value"] for row in rows_of(run(consume_all(cluster.bootstrap, "hosts", 2)))]
    assert values[0] == b"before" and values[-1] == b"after"


def test_the_network_is_gone_after_stop(netns_cluster: Callable[..., NetnsCluster]) -> None:
    cluster = netns_cluster(1)
    namespaces = cluster.network.namespaces()
    assert set(namespaces) <= set(network.leftover_namespaces())
    cluster.stop_all()
    assert not set(namespaces) & set(network.leftover_namespaces())
