"""Replicas of a compacted topic: each cleans its own copy, and a follower that starts
from nothing copies the leader's cleaned log, offset gaps included, and converges."""

from __future__ import annotations

import time

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig
from tests.support import BrokerFactory, create, replica_records, run, start_cluster

pytestmark = pytest.mark.slow

KEYS = 50
RECORDS = 5_000
TOPIC = "replicated-table"
PARTITION_DIR = f"{TOPIC}-0"


async def fill(bootstrap: list[tuple[str, int]]) -> dict[int, bytes]:
    """Values over 50 keys, then records of another key to seal their segments; the
    last value per key, by offset."""
    await create(bootstrap, TOPIC, rf=2, **{"cleanup.policy": "compact", "segment.bytes": "16384"})
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(batch_records=100))
        keys = [f"k{i % KEYS:02d}" for i in range(RECORDS)]
        values = [f"{k}-v{i}" for i, k in enumerate(keys)]
        sent = await producer.send_records(TOPIC, values, keys, partition=0)
        filler = ["x" * 100] * 300
        await producer.send_records(TOPIC, filler, ["filler"] * len(filler), partition=0)
        await producer.close()
    finally:
        await cluster.close()
    last = {k: (m.offset, v) for k, v, m in zip(keys, values, sent, strict=True)}
    return {offset: value.encode() for offset, value in last.values()}


def keyed_records(brokers: BrokerFactory, broker_id: int) -> dict[int, bytes]:
    held = replica_records(brokers.brokers[broker_id].log_dir / PARTITION_DIR)
    return {offset: value for offset, value in held if not value.startswith(b"x")}


def wait_until_cleaned(brokers: BrokerFactory, broker_id: int, expected: dict[int, bytes]) -> None:
    deadline = time.monotonic() + 60
    held: dict[int, bytes] = {}
    while time.monotonic() < deadline:
        held = keyed_records(brokers, broker_id)
        if held == expected:
            return
        time.sleep(0.5)
    raise AssertionError(f"broker {broker_id} holds {len(held)} keyed records, not {len(expected)}")


def test_each_replica_cleans_and_an_empty_follower_copies_the_gaps(brokers: BrokerFactory) -> None:
    start_cluster(brokers, count=2, **{"log.cleaner.backoff.ms": "200"})
    expected = run(fill(brokers.bootstrap))
    for broker_id in (1, 2):
        wait_until_cleaned(brokers, broker_id, expected)
    leader_records = replica_records(brokers.brokers[1].log_dir / PARTITION_DIR)
    offsets = [offset for offset, _ in leader_records]
    assert offsets != list(range(offsets[0], offsets[0] + len(offsets))), "gaps left"

    follower = brokers.brokers[2]
    follower.stop()
    for path in (follower.log_dir / PARTITION_DIR).iterdir():
        path.unlink()
    brokers.start(2)
    wait_until_cleaned(brokers, 2, expected)
