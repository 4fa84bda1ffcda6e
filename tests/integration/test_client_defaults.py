"""The client as nobody configured it, against real brokers.

A default producer must be idempotent with acks=all (Kafka's defaults since 3.0), so a
retry of a batch the leader already appended never stores it twice; metadata older than
what the client knows must not move a partition back to its old leader; a refresh does
not always ask the same broker.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from spark_replica.client import Admin, Cluster, Producer, ProducerConfig
from spark_replica.records import BatchHeader, iter_batches
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.metadata import MetadataResponse, PartitionMetadata
from spark_replica.wire.native.produce import ACKS_ALL
from tests.support import BrokerFactory, run

pytestmark = pytest.mark.slow

# A paused follower stays in the ISR this long, so an acks=all produce waits for it.
SLOW_ISR_SHRINK = {"replica.lag.time.max.ms": "30000"}
REQUEST_TIMEOUT_MS = 1000
# Longer than one request timeout (the first attempt times out), shorter than the
# ZooKeeper session timeout of test brokers (the follower stays registered).
FOLLOWER_PAUSE_S = 1.6


def batch_headers(partition_dir: Path) -> list[BatchHeader]:
    """Every batch a broker stores for one partition, read from its segment files."""
    return [
        header
        for segment in sorted(partition_dir.glob("*.log"))
        for header, _ in iter_batches(segment.read_bytes())
    ]


async def leader_of(bootstrap: list[tuple[str, int]], tp: TopicPartition) -> tuple[int, int]:
    """(leader, leader epoch) of a partition, from a fresh client's metadata."""
    cluster = Cluster(bootstrap)
    try:
        await cluster.ensure_topic(tp.topic)
        partition = cluster.partition(tp)
        return partition.leader, partition.leader_epoch
    finally:
        await cluster.close()


@pytest.mark.parametrize("idempotent", [True, False], ids=["default", "idempotence-off"])
def test_a_default_producer_retries_a_timed_out_batch_without_a_second_copy(
    brokers: BrokerFactory, idempotent: bool
) -> None:
    """The first attempt is appended but times out waiting for a paused follower.

    The default producer's retry is recognised by the leader (same producer id and
    sequence) and answered with the first attempt's offset; with idempotence turned off
    the same retry stores the record again, which is why it is not the default.
    """
    for broker_id in (1, 2):
        brokers.start(broker_id, **SLOW_ISR_SHRINK)
    bootstrap = brokers.bootstrap
    tp = TopicPartition("defaults", 0)
    if idempotent:
        config = ProducerConfig(request_timeout_ms=REQUEST_TIMEOUT_MS)
    else:
        config = ProducerConfig(
            acks=ACKS_ALL, enable_idempotence=False, request_timeout_ms=REQUEST_TIMEOUT_MS
        )

    async def scenario() -> tuple[int, float]:
        cluster = Cluster(bootstrap)
        try:
            await Admin(cluster).create_topic(tp.topic, 1, 2)
            leader, _ = await leader_of(bootstrap, tp)
            follower = brokers.brokers[3 - leader]
            follower.pause()
            asyncio.get_running_loop().call_later(FOLLOWER_PAUSE_S, follower.resume)
            started = time.monotonic()
            try:
                await Producer(cluster, config).send_records(tp.topic, ["once"], partition=0)
            finally:
                follower.resume()
            return leader, time.monotonic() - started
        finally:
            await cluster.close()

    leader, elapsed = run(scenario())
    assert elapsed >= REQUEST_TIMEOUT_MS / 1000, "the first attempt was not acknowledged"
    headers = batch_headers(brokers.brokers[leader].log_dir / "defaults-0")
    if idempotent:
        assert len(headers) == 1, f"stored once, not {len(headers)} times"
        assert headers[0].producer_id >= 0, "the broker saw a producer id"
    else:
        assert len(headers) >= 2, "without idempotence the retry is a second copy"
        assert {h.producer_id for h in headers} == {-1}


def test_a_client_given_a_stale_answer_keeps_the_newer_leader(brokers: BrokerFactory) -> None:
    """A real answer from before a leader change, arriving after it, changes nothing.

    That is what a broker that missed the controller's update (paused, cut off) would
    answer; the client must keep routing to the leader with the newer epoch.
    """
    for broker_id in (1, 2, 3):
        brokers.start(broker_id)
    tp = TopicPartition("stale", 0)

    async def scenario() -> tuple[int, int, int]:
        cluster = Cluster(brokers.bootstrap)
        try:
            await Admin(cluster).create_topic(tp.topic, 1, 3)
            old_answer = await answer_naming_a_leader(cluster, tp)
            old = old_answer.topics[0].partitions[0]
            await asyncio.to_thread(brokers.brokers[old.leader].stop)
            deadline = time.monotonic() + 30
            while (await known_partition(cluster, tp)).leader_epoch <= old.leader_epoch:
                assert time.monotonic() < deadline, "no new leader within 30 s"
                await asyncio.sleep(0.2)
                await cluster.refresh([tp.topic])
            new_leader = cluster.leader_for(tp)
            cluster.apply_metadata(old_answer, complete=False)
            kept = cluster.leader_for(tp)
            sent = await Producer(cluster).send_records(tp.topic, ["after"], partition=0)
            assert sent[0].offset == 0
            return old.leader, new_leader, kept
        finally:
            await cluster.close()

    old_leader, new_leader, kept = run(scenario())
    assert kept == new_leader != old_leader


async def known_partition(cluster: Cluster, tp: TopicPartition) -> PartitionMetadata:
    """The client's view of a partition, asking again while a broker does not know it yet."""
    await cluster.ensure_topic(tp.topic)
    return cluster.partition(tp)


async def answer_naming_a_leader(cluster: Cluster, tp: TopicPartition) -> MetadataResponse:
    """A Metadata answer, straight from a broker, that names the partition's leader."""
    deadline = time.monotonic() + 30
    while True:
        answer = await cluster.refresh([tp.topic])
        topic = answer.topics[0]
        if not topic.error_code and topic.partitions[0].leader >= 0:
            return answer
        assert time.monotonic() < deadline, "no broker named a leader within 30 s"
        await asyncio.sleep(0.1)


async def brokers_named_by(address: tuple[str, int]) -> set[int]:
    """The broker ids one broker's Metadata answer names."""
    single = Cluster([address])
    try:
        answer = await single.refresh([])
        return {broker.broker_id for broker in answer.brokers}
    finally:
        await single.close()


def test_each_metadata_refresh_asks_the_next_broker(brokers: BrokerFactory) -> None:
    for broker_id in (1, 2, 3):
        brokers.start(broker_id)

    async def scenario() -> list[str | None]:
        cluster = Cluster(brokers.bootstrap)
        try:
            # Placing three replicas means the controller knows all three; each broker
            # hears of the others by the controller's UpdateMetadata, which a loaded
            # machine delays: the client knows only the brokers its last answer named.
            await Admin(cluster).create_topic("everywhere", 1, 3)
            deadline = time.monotonic() + 45
            # Every broker must name all three, or an answer from one that does not yet
            # would leave the client only the brokers it names...
            for address in brokers.bootstrap:
                while len(await brokers_named_by(address)) < 3:
                    assert time.monotonic() < deadline, f"{address} did not name all in 45 s"
                    await asyncio.sleep(0.1)
            # ... and none is skipped as unresponsive (a slow answer on a loaded machine).
            while len(cluster.brokers) < 3 or cluster._unresponsive_until:
                assert time.monotonic() < deadline, "no answer named all three brokers in 45 s"
                await asyncio.sleep(0.1)
                await cluster.refresh([])
            sources = []
            for _ in range(6):
                await cluster.refresh([])
                sources.append(cluster.metadata_source)
            return sources
        finally:
            await cluster.close()

    sources = run(scenario())
    every_broker = {f"{b.host}:{b.port}" for b in brokers.brokers.values()}
    assert set(sources[:3]) == set(sources[3:]) == every_broker, f"asked {sources}"
    assert all(a != b for a, b in itertools.pairwise(sources)), f"asked {sources}"
