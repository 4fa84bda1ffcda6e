"""Follower fetch offsets outside the leader's log: the leader checks them before trusting
them, and a follower ahead of its leader truncates by leader epoch instead of stalling.
And a fetch's max_bytes is capped, whatever the fetcher asks for."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from brokerd.core.fetch import FETCH_MAX_BYTES
from brokerd.log import Log
from brokerd.log.config import LogConfig
from brokerd.replication.partition import Partition
from brokerd.replication.replica_fetcher import ReplicaFetcher
from spark_replica.client import BrokerConnection, Cluster
from spark_replica.errors import OffsetOutOfRangeError
from spark_replica.records import build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.support import (
    BrokerFactory,
    create,
    create_topic,
    leadership,
    run,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

# How long a refused follower is watched for (wrongly) rejoining the ISR.
REJOIN_WATCH_S = 5.0
INT32_MAX = 2**31 - 1
# 64 KiB segments and 30 batches of about 10 KB: the follower falls 300 KB behind.
SMALL_SEGMENT = 64 * 1024
BEHIND_BATCHES = 30


async def send_one(address: tuple[str, int], request: object) -> object:
    conn = BrokerConnection(*address)
    await conn.connect()
    try:
        return await conn.send(request)
    finally:
        await conn.close()


async def produce(address: tuple[str, int], topic: str, count: int) -> None:
    batch = build_batch([f"v{i}" for i in range(count)])
    request = ProduceRequest(1, 10_000, [ProduceTopic(topic, [ProducePartition(0, batch)])])
    response = await send_one(address, request)
    assert response.topics[0].partitions[0].error_code == 0


def test_a_fetch_offset_past_the_leaders_end_never_brings_a_replica_into_the_isr(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> tuple[int, list[int]]:
        await create(bootstrap, "bogus", rf=3)
        state = (await leadership(bootstrap, "bogus"))[0]
        leader = state["leader"]
        absent = next(r for r in state["replicas"] if r != leader)
        live = [(b.host, b.port) for i, b in brokers.brokers.items() if i != absent]
        await asyncio.to_thread(brokers.brokers[absent].stop)

        async def absent_out_of_isr() -> bool:
            return absent not in (await leadership(live, "bogus"))[0]["isr"]

        await wait_for(absent_out_of_isr)
        address = (brokers.brokers[leader].host, brokers.brokers[leader].port)
        await produce(address, "bogus", 5)
        # A fetch in the name of the stopped replica, from far past the leader's end.
        fetch = FetchRequest(
            0,
            1,
            1024 * 1024,
            [FetchTopic("bogus", [FetchPartition(0, 1_000, 1024 * 1024)])],
            absent,
        )
        code = (await send_one(address, fetch)).topics[0].partitions[0].error_code
        isrs = []
        deadline = time.monotonic() + REJOIN_WATCH_S
        while time.monotonic() < deadline:
            isrs.append((await leadership(live, "bogus"))[0]["isr"])
            await asyncio.sleep(0.5)
        return code, [r for isr in isrs for r in isr if r == absent]

    code, rejoined = run(scenario(), timeout_s=90)
    assert code == OffsetOutOfRangeError.code
    assert rejoined == [], "the stopped replica was taken into the ISR"


def test_a_follower_ahead_of_its_leader_truncates_instead_of_stalling(
    brokers: BrokerFactory, tmp_path: Path
) -> None:
    leader = brokers.start(1)
    address = (leader.host, leader.port)
    tp = TopicPartition("ahead", 0)

    async def scenario() -> int:
        await create_topic(brokers.bootstrap, tp.topic)
        cluster = Cluster(brokers.bootstrap)
        try:
            epoch = (await cluster.ensure_topic(tp.topic)).partitions[0].leader_epoch
        finally:
            await cluster.close()
        await produce(address, tp.topic, 5)
        # A local replica holding 8 records of the leader's own epoch: 3 more than the
        # leader (as after the leader lost an unflushed tail), already past truncation.
        log = Log.open(tmp_path / "ahead-0", LogConfig(), now_ms=0)
        follower = Partition(tp, log, 2)
        follower.make_leader(epoch, [2], [1, 2], zk_version=0, controller_epoch=1, now_ms=0)
        follower.append_as_leader(build_batch([f"x{i}" for i in range(8)]), 1, now_ms=0)
        follower.make_follower(1, epoch, [1, 2], controller_epoch=1)
        fetcher = ReplicaFetcher(2, 1, address)
        fetcher.add(follower, needs_truncation=False)
        try:

            async def truncated() -> bool:
                return log.log_end_offset == 5

            await wait_for(truncated, timeout_s=15)
            return log.log_end_offset
        finally:
            await fetcher.stop()
            log.close()

    assert run(scenario(), timeout_s=60) == 5


def test_a_fetch_never_answers_more_than_the_brokers_cap(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    address = (broker.host, broker.port)
    big_value = b"x" * (1024 * 1024)

    async def scenario() -> int:
        await create_topic(brokers.bootstrap, "large")
        # Six batches of 12 MiB: more in the log than one fetch may answer.
        for _ in range(6):
            batch = build_batch([big_value] * 12)
            request = ProduceRequest(
                1, 30_000, [ProduceTopic("large", [ProducePartition(0, batch)])]
            )
            response = await send_one(address, request)
            assert response.topics[0].partitions[0].error_code == 0
        fetch = FetchRequest(
            0, 1, INT32_MAX, [FetchTopic("large", [FetchPartition(0, 0, INT32_MAX)])], 2
        )
        response = await send_one(address, fetch)
        result = response.topics[0].partitions[0]
        assert result.error_code == 0
        return len(result.records)

    size = run(scenario(), timeout_s=90)
    assert 0 < size <= FETCH_MAX_BYTES


def test_a_follower_behind_by_more_than_a_segment_catches_up(brokers: BrokerFactory) -> None:
    """With small segments, a lagging follower's fetch answer holds more bytes than one
    segment takes: it must be appended across segments, not refused for ever (which left
    the follower out of the ISR for good)."""
    start_cluster(brokers, count=2)
    bootstrap = brokers.bootstrap

    async def scenario() -> list[int]:
        await create(bootstrap, "small-segments", rf=2, **{"segment.bytes": str(SMALL_SEGMENT)})
        state = (await leadership(bootstrap, "small-segments"))[0]
        follower = next(r for r in state["replicas"] if r != state["leader"])
        leader = brokers.brokers[state["leader"]]
        await asyncio.to_thread(brokers.brokers[follower].stop)

        async def follower_out_of_isr() -> bool:
            return follower not in (await leadership(bootstrap, "small-segments"))[0]["isr"]

        await wait_for(follower_out_of_isr)
        value = "x" * 1000
        for _ in range(BEHIND_BATCHES):
            batch = build_batch([value] * 10)
            request = ProduceRequest(
                1, 10_000, [ProduceTopic("small-segments", [ProducePartition(0, batch)])]
            )
            answer = await send_one((leader.host, leader.port), request)
            assert answer.topics[0].partitions[0].error_code == 0
        await asyncio.to_thread(brokers.start, follower)

        async def isr_refilled() -> list[int] | None:
            isr = (await leadership(bootstrap, "small-segments"))[0]["isr"]
            return isr if len(isr) == 2 else None

        return await wait_for(isr_refilled, timeout_s=30)

    assert len(run(scenario(), timeout_s=120)) == 2
