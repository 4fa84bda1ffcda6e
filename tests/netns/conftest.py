"""Tests on separate hosts (network namespaces): each skips, with the reason, where this
machine cannot make namespaces (not root, no iproute2)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_replica.tools.netns.network import unavailable_reason
from tests.support_netns import NetnsCluster

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.skip(reason=f"no network namespaces here: {reason}"))


@pytest.fixture
def netns_cluster(tmp_path: Path) -> Iterator[Callable[..., NetnsCluster]]:
    """Starts a cluster on separate hosts: `netns_cluster(3, **broker_overrides)`; every
    cluster started is stopped, and its network removed, after the test."""
    started: list[NetnsCluster] = []

    def start(broker_count: int = 3, **overrides: str) -> NetnsCluster:
        cluster = NetnsCluster(tmp_path / f"cluster-{len(started)}", broker_count, **overrides)
        started.append(cluster)
        cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop_all()
