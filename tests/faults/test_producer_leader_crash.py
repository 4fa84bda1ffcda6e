"""A producer follows a crashed leader to its successor without sitting out its backoff.

The brokers fail a killed broker over within about 100 ms, but right after the crash
the metadata still names the dead leader, so the producer's immediate retry is refused
and waits a backoff. With a backoff far longer than any failover here, a producer that
resent only when the backoff ended (and with metadata from the moment of the crash)
would take two backoffs; one that watches the metadata for the new leader is done long
before the first ends.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.records import build_batch
from spark_replica.wire.native.produce import ACKS_ALL
from tests.support import BrokerFactory, create, leadership, run, start_cluster

pytestmark = pytest.mark.slow

TOPIC = "crash-produce"
LONG_SESSION_MS = 30_000  # the crash, not the session, must move the partition
BACKOFF_MS = 20_000
# Well below BACKOFF_MS, and generous for a failover on a busy 2-core machine.
ACK_DEADLINE_S = 15.0
WARMUP_ACKS = 5


async def acked_after_kill(brokers: BrokerFactory) -> float:
    """Seconds from killing the partition's leader mid-stream to the acknowledgement of
    the first batch sent after the kill."""
    leader = int((await leadership(brokers.bootstrap, TOPIC))[0]["leader"])
    cluster = Cluster(brokers.bootstrap)
    config = ProducerConfig(
        acks=ACKS_ALL, retry_backoff_ms=BACKOFF_MS, retry_backoff_max_ms=BACKOFF_MS
    )
    batch = build_batch([b"r" * 100] * 10)
    warm = asyncio.Event()
    killed_at: list[float] = []

    async def produce() -> float:
        acked = 0
        while True:
            sent = time.monotonic()
            await producer.send_batch(TOPIC, 0, batch)
            acked += 1
            if acked >= WARMUP_ACKS:
                warm.set()
            if killed_at and sent >= killed_at[0]:
                return time.monotonic() - killed_at[0]

    try:
        producer = Producer(cluster, config)
        sending = asyncio.create_task(produce())
        try:
            await asyncio.wait_for(warm.wait(), 60)
            killed_at.append(time.monotonic())
            await asyncio.to_thread(brokers.brokers[leader].kill)
            try:
                return await asyncio.wait_for(asyncio.shield(sending), ACK_DEADLINE_S)
            except TimeoutError:
                raise AssertionError(
                    f"no batch sent after killing leader {leader} was acknowledged within "
                    f"{ACK_DEADLINE_S} s (retry backoff {BACKOFF_MS} ms)"
                ) from None
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            await producer.close()
    finally:
        await cluster.close()


def test_next_batch_is_acknowledged_by_the_new_leader_before_the_backoff_ends(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers, **{"zookeeper.session.timeout.ms": str(LONG_SESSION_MS)})
    run(create(brokers.bootstrap, TOPIC, partitions=1, rf=3, **{"min.insync.replicas": "2"}))

    async def full_isr() -> bool:
        isr = (await leadership(brokers.bootstrap, TOPIC))[0]["isr"]
        return isinstance(isr, list) and len(isr) == 3

    deadline = time.monotonic() + 30
    while not run(full_isr()):
        assert time.monotonic() < deadline, "the topic's ISR never filled"
        time.sleep(0.1)

    elapsed_s = run(acked_after_kill(brokers), timeout_s=90)

    assert elapsed_s < ACK_DEADLINE_S
