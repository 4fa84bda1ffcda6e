"""Shared fixtures: one real ZooKeeper per test session, real broker processes per test.

Each test gets its own ZooKeeper chroot, so tests sharing the server never see each
other's brokers or topics. Every process a test starts is stopped by the test's
teardown, by its own PID. Helpers (run, create_topic, BrokerFactory) are in support.py.

The suite runs on pytest-xdist workers (pyproject.toml's addopts): each worker is a test
session of its own, with its own ZooKeeper. Tests that share something costlier than a
ZooKeeper are kept on one worker by an xdist group (see `pytest_collection_modifyitems`):
the Spark tests share one SparkSession and one cluster, and the tests on separate hosts
(tests/netns and the chaos harness's --netns schedules) share the machine's network
namespaces and bridge.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from brokerd.controller import zk_requests
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.zk.session import connect
from tests.support import BrokerFactory


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(free_port(), tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: EmbeddedZooKeeper) -> str:
    """A connect string with a chroot of this test's own."""
    return f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def counted_zk(zk_connect: str) -> Iterator[KazooClient]:
    """A client rooted at the test's chroot whose requests the controller's round-trip
    counter sees (brokerd.controller.zk_requests)."""
    client = connect(zk_connect)
    zk_requests.install(client)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(zk_connect, tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def broker(brokers: BrokerFactory) -> BrokerProcess:
    return brokers.start(1)


# Folders whose tests must all run on one worker, and the xdist group that keeps them there.
ONE_WORKER_FOLDERS = {"spark": "spark", "netns": "netns", "chaos": "netns"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put each test of a one-worker folder in its folder's xdist group (used by
    `--dist loadgroup`; without xdist the marker means nothing). First among the hooks:
    xdist reads the markers in its own hook, and one added after it is never seen."""
    tests_root = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(tests_root).parts[0]
        group = ONE_WORKER_FOLDERS.get(folder)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
