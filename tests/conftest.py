"""Shared fixtures: one real ZooKeeper per test session, real broker processes per test.

Each test gets its own ZooKeeper chroot, so tests sharing the server never see each
other's brokers or topics. Every process a test starts is stopped by the test's
teardown, by its own PID. Helpers (run, create_topic, BrokerFactory) are in support.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from brokerd.controller import zk_requests
from spark_replica.launcher import BrokerProcess, free_port
from spark_replica.zk.embedded import EmbeddedZooKeeper
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
