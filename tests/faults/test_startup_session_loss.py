"""A broker that loses ZooKeeper while it starts must end up registered, or exit.

The broker is held in its registration loop (its id is taken by another session) when
ZooKeeper goes away. Like Kafka, it must register once ZooKeeper is back, on its old
session or a new one; and if it cannot get through at all (a server that lost its data
refuses a client that has seen newer transactions), start-up must fail and the process
exit, so that a supervisor restarts it. Running unregistered would leave a process that
nobody can reach.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.zk import znodes
from spark_replica.zk.session import connect

pytestmark = pytest.mark.slow

SESSION = {"zookeeper.session.timeout.ms": "3000"}
CONNECTED_WITHIN_S = 30
REGISTERED_WITHIN_S = 45
# brokerd.zk_sync.REGISTRATION_TIMEOUT_S, with room for a slow start-up and exit.
GIVES_UP_WITHIN_S = 60
# A session that outlives the broker's restart. ZooKeeper comes back more than one
# session timeout after the restarted broker began to register (13 s plus its own
# start-up), so the old registration, timed again from then, outlasts two session
# timeouts counted from the restart; yet well within the 30 s the broker waits for
# ZooKeeper with this session, even on a loaded machine.
LONG_SESSION = {"zookeeper.session.timeout.ms": "15000"}
ZOOKEEPER_DOWN_S = 13
CONNECTED = "state: CONNECTED"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[EmbeddedZooKeeper]]:
    """ZooKeeper servers the test starts on one port, one after the other."""
    started: list[EmbeddedZooKeeper] = []
    try:
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def broker(tmp_path: Path, servers: list[EmbeddedZooKeeper]) -> Iterator[BrokerProcess]:
    """Broker 1, started and waiting for a registration another session holds."""
    servers.append(EmbeddedZooKeeper(free_port(), tmp_path / "zookeeper-first"))
    servers[0].start()
    broker = BrokerProcess(
        1, free_port(), tmp_path / "broker-1", servers[0].connect_string, overrides=SESSION
    )
    holder = connect(servers[0].connect_string)
    try:
        holder.ensure_path(znodes.BROKER_IDS_PATH)
        holder.create(znodes.broker_path(1), b"{}", ephemeral=True)
        launch_waiting(broker)
    finally:
        holder.stop()
        holder.close()
    try:
        yield broker
    finally:
        broker.stop()


def launch_waiting(broker: BrokerProcess) -> None:
    """Start the broker's process without waiting for it to register (its id is held)."""
    broker.log_dir.mkdir(parents=True, exist_ok=True)
    log = broker.log_dir / "broker.log"
    connections_before = connections(log)
    with (broker.log_dir / "broker.stderr").open("ab") as stderr:
        broker.process = subprocess.Popen(
            broker.command(),
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    deadline = time.monotonic() + CONNECTED_WITHIN_S
    while connections(log) <= connections_before:
        assert time.monotonic() < deadline, "the broker never connected to ZooKeeper"
        time.sleep(0.1)
    time.sleep(1)  # reading assignments is done: now it waits for the holder to go


def connections(log: Path) -> int:
    """How often the broker's log says it connected to ZooKeeper."""
    return log.read_text(errors="replace").count(CONNECTED) if log.exists() else 0


def test_zookeeper_restarting_before_registration_is_waited_out(
    broker: BrokerProcess, servers: list[EmbeddedZooKeeper]
) -> None:
    servers[0].stop()
    servers[0].start()
    broker.wait_registered(REGISTERED_WITHIN_S)
    time.sleep(1)
    assert broker.process is not None and broker.process.poll() is None
    zk = connect(servers[0].connect_string)
    try:
        assert zk.exists(znodes.broker_path(1)) is not None, "still registered"
    finally:
        zk.stop()
        zk.close()


def test_a_broker_that_cannot_get_through_to_register_exits(
    tmp_path: Path, broker: BrokerProcess, servers: list[EmbeddedZooKeeper]
) -> None:
    servers[0].stop()
    servers.append(EmbeddedZooKeeper(servers[0].port, tmp_path / "zookeeper-empty"))
    servers[1].start()
    assert broker.process is not None
    code = broker.process.wait(timeout=GIVES_UP_WITHIN_S)
    assert code != 0
    assert b"ZooKeeper" in (broker.log_dir / "broker.stderr").read_bytes()


def test_a_restarted_broker_outwaits_its_old_session_across_a_zookeeper_restart(
    tmp_path: Path, servers: list[EmbeddedZooKeeper]
) -> None:
    """The killed broker's registration lingers until its session expires, and a
    ZooKeeper restart starts that session's timeout again: the restarted broker must wait
    it out, not give up after two session timeouts counted from its own start."""
    servers.append(EmbeddedZooKeeper(free_port(), tmp_path / "zookeeper"))
    servers[0].start()
    broker = BrokerProcess(
        1, free_port(), tmp_path / "broker-1", servers[0].connect_string, overrides=LONG_SESSION
    )
    zk = connect(servers[0].connect_string)
    try:
        broker.start()
        old = zk.exists(znodes.broker_path(1))
        assert old is not None
        broker.kill()
        launch_waiting(broker)
        servers[0].stop()
        time.sleep(ZOOKEEPER_DOWN_S)
        servers[0].start()
        broker.wait_registered(REGISTERED_WITHIN_S + 30, stale_czxid=old.czxid)
        assert broker.process is not None and broker.process.poll() is None
    finally:
        zk.stop()
        zk.close()
        broker.stop()
