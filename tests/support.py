"""Helpers shared by the tests that start real processes (fixtures are in conftest.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from spark_replica.client import Admin, Cluster
from spark_replica.launcher import BrokerProcess, free_port

T = TypeVar("T")

# Short enough that a SIGKILLed broker's registration goes away quickly on restart.
TEST_BROKER_OVERRIDES = {"zookeeper.session.timeout.ms": "3000"}


def run(awaitable: Awaitable[T], timeout_s: float = 120.0) -> T:
    """Run a coroutine to completion on a fresh loop, with a deadline."""

    async def bounded() -> T:
        return await asyncio.wait_for(awaitable, timeout_s)

    return asyncio.run(bounded())


class BrokerFactory:
    """Starts brokers for one test and stops every one of them afterwards."""

    def __init__(self, zk_connect: str, root: Path) -> None:
        self.zk_connect = zk_connect
        self.root = root
        self.brokers: dict[int, BrokerProcess] = {}

    def start(self, broker_id: int = 1, **overrides: str) -> BrokerProcess:
        broker = self.brokers.get(broker_id)
        if broker is None:
            broker = BrokerProcess(
                broker_id,
                free_port(),
                self.root / f"broker-{broker_id}",
                self.zk_connect,
                overrides={**TEST_BROKER_OVERRIDES, **overrides},
            )
            self.brokers[broker_id] = broker
        elif overrides:
            broker.overrides.update(overrides)
        broker.start()
        return broker

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [(b.host, b.port) for b in self.brokers.values()]

    def stop_all(self) -> None:
        for broker in self.brokers.values():
            broker.stop()


async def create_topic(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int = 1, **configs: str
) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(topic, partitions, 1, configs)
    finally:
        await cluster.close()


CLI_TIMEOUT_S = 90


def replog(
    *args: str, stdin: bytes = b"", cwd: Path | None = None, timeout_s: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """Run the `replog` command line as a user would, with a deadline."""
    return subprocess.run(
        [sys.executable, "-m", "spark_replica.cli.main", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=timeout_s,
        check=False,
    )


async def produce_acks_all(bootstrap: list[tuple[str, int]], topic: str, partition: int) -> bool:
    """One acks=all write with a short delivery timeout; True once it is acknowledged."""
    from spark_replica.client import Producer, ProducerConfig
    from spark_replica.errors import ReplogError

    cluster = Cluster(bootstrap)
    try:
        config = ProducerConfig(acks=-1, delivery_timeout_ms=5_000)
        await Producer(cluster, config).send_records(topic, ["x"], partition=partition)
        return True
    except ReplogError:
        return False
    finally:
        await cluster.close()
