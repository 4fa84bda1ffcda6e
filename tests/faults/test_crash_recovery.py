"""SIGKILL a broker mid-write, tear the tail of its active segment, restart it.

The recovered log must hold exactly a prefix of what was sent, end at the last whole
batch, serve it, and accept new writes right after it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.errors import ReplogError
from spark_replica.records import iter_batches
from tests.support import BrokerFactory, consume_all, create_topic, rows_of, run

pytestmark = pytest.mark.slow

BATCH_RECORDS = 50


def active_segment(partition_dir: Path) -> Path:
    return sorted(partition_dir.glob("*.log"))[-1]


@pytest.mark.parametrize("cut_bytes", [1, 37, 200])
def test_sigkill_during_writes_then_torn_tail_recovers(
    brokers: BrokerFactory, cut_bytes: int
) -> None:
    broker = brokers.start(1, **{"log.segment.bytes": "262144"})
    bootstrap = [(broker.host, broker.port)]
    sent: list[str] = []
    acked: list[int] = []

    async def produce_until_killed() -> None:
        await create_topic(bootstrap, "crashy")
        cluster = Cluster(bootstrap)
        producer = Producer(
            cluster, ProducerConfig(batch_records=BATCH_RECORDS, delivery_timeout_ms=1000)
        )
        try:
            for batch_number in range(100_000):
                values = [f"b{batch_number}-r{i}" for i in range(BATCH_RECORDS)]
                sent.extend(values)
                try:
                    await producer.send_records("crashy", values, partition=0)
                except ReplogError:
                    return
                acked.append(len(sent))
                if batch_number == 150:
                    await asyncio.to_thread(broker.kill)
        finally:
            await cluster.close()

    run(produce_until_killed())
    assert broker.process is None and acked, "the broker was killed after some acks"

    segment = active_segment(broker.log_dir / "crashy-0")
    data = segment.read_bytes()
    whole = list(iter_batches(data))
    assert whole, "the active segment holds batches"
    segment.write_bytes(data[: len(data) - cut_bytes])
    expected = whole[-1][0].base_offset  # the torn batch goes; everything before stays

    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]
    rows = rows_of(run(consume_all(bootstrap, "crashy", expected)))
    assert [r["offset"] for r in rows] == list(range(expected))
    assert [r["value"].decode() for r in rows] == sent[:expected]
    assert expected >= acked[-1] - BATCH_RECORDS

    async def produce_after() -> int:
        cluster = Cluster(bootstrap)
        try:
            metadata = await Producer(cluster).send_records("crashy", ["after"], partition=0)
            return metadata[0].offset
        finally:
            await cluster.close()

    assert run(produce_after()) == expected
