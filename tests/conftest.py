"""Shared fixtures: one real ZooKeeper per test session, real broker processes per test.

Each test gets its own ZooKeeper chroot, so tests sharing the server never see each
other's brokers or topics. Every process a test starts is stopped by the test's
teardown, by its own PID. Helpers (run, create_topic, BrokerFactory) are in support.py.

The suite runs on pytest-xdist workers (pyproject.toml's addopts): each worker is a test
session of its own, with its own ZooKeeper. Tests that share something costlier than a
ZooKeeper are kept on one worker by the scheduler below (`OneWorkerFolders`):
the Spark tests share one SparkSession and one cluster, and the tests on separate hosts
(tests/netns and the chaos harness's --netns schedules) share the machine's network
namespaces and bridge.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from xdist.scheduler import LoadScopeScheduling

from brokerd.controller import zk_requests
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.zk.session import connect
from tests.support import BrokerFactory


def pytest_configure(config: pytest.Config) -> None:
    """Let every process the suite starts write the bytecode of what it imports.

    The suite starts hundreds of Python processes (about 400 brokers, the command line,
    helpers), each importing the project afresh. Where PYTHONDONTWRITEBYTECODE is set in
    the environment, none writes its bytecode, so every one of them compiled every module
    from source: a quarter of a second of CPU per broker start. The workers and every
    process they start inherit this environment; `__pycache__` is ignored by git.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(free_port(), tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    """A ZooKeeper server of the test's own, for tests that stop it."""
    server = EmbeddedZooKeeper(free_port(), tmp_path / "zookeeper")
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
def zk(zk_connect: str) -> Iterator[KazooClient]:
    """A ZooKeeper client rooted at the test's chroot."""
    client = connect(zk_connect)
    try:
        yield client
    finally:
        client.stop()
        client.close()


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


# Folders whose tests must all run on one worker, and the scope that keeps them there.
ONE_WORKER_FOLDERS = {"spark": "spark", "netns": "netns", "chaos": "netns"}


class OneWorkerFolders(LoadScopeScheduling):
    """xdist's scope scheduling with one scope per test, except that the tests of a
    one-worker folder share one scope, so one worker runs all of them.

    A scheduler rather than xdist_group markers: pytest 9 derives a node's id from its
    own fields, so the group suffix xdist writes into `_nodeid` never reaches the
    scheduler, and `--dist loadgroup` spreads grouped tests like any others."""

    def _split_scope(self, nodeid: str) -> str:
        parts = nodeid.split("/", 2)
        group = ONE_WORKER_FOLDERS.get(parts[1]) if parts[0] == "tests" and len(parts) > 2 else None
        return nodeid if group is None else group


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> OneWorkerFolders:
    return OneWorkerFolders(config, log)
