"""An idempotent producer keeps delivering after records it gave up on at the delivery
timeout: real brokers, RF 3, min.insync.replicas 2, both followers frozen and thawed."""

from __future__ import annotations

import asyncio

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.errors import DeliveryTimeoutError
from tests.support import (
    BrokerFactory,
    create,
    leadership,
    produce_acks_all,
    read_everything,
    run,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

TOPIC = "recovering"
CONFIG = ProducerConfig(
    delivery_timeout_ms=3_000,
    request_timeout_ms=1_000,
    retry_backoff_ms=50,
    linger_ms=2,
    batch_records=5,
)


async def send_in_bursts(producer: Producer, values: list[str]) -> list[BaseException | int]:
    """Send `values` to partition 0 a few at a time, so that several batches are in
    flight; return each one's offset or error."""
    futures = []
    for n, value in enumerate(values):
        futures.append(await producer.send_future(TOPIC, value, partition=0))
        if n % 5 == 4:
            await asyncio.sleep(0.01)
    answers = await asyncio.gather(*futures, return_exceptions=True)
    return [a if isinstance(a, BaseException) else a.offset for a in answers]


def test_records_after_a_delivery_timeout_are_delivered_once_and_in_order(
    brokers: BrokerFactory,
) -> None:
    """Records appended by the leader but never acknowledged (both followers frozen)
    expire, each with a DeliveryTimeoutError, not OUT_OF_ORDER_SEQUENCE for those behind
    the first; once the followers are back the same Producer (a new epoch for the
    partition) delivers what it sends next, and nothing acknowledged is stored twice or
    out of order."""
    start_cluster(brokers)
    bootstrap = brokers.bootstrap
    acknowledged: list[str] = []
    timed_out: list[str] = []

    async def scenario() -> int:
        await create(bootstrap, TOPIC, rf=3, **{"min.insync.replicas": "2"})
        leader = (await leadership(bootstrap, TOPIC))[0]["leader"]
        followers = [b for broker_id, b in brokers.brokers.items() if broker_id != leader]
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, CONFIG)
            first = [f"before-{i}" for i in range(20)]
            await producer.send_records(TOPIC, first, partition=0)
            acknowledged.extend(first)

            for follower in followers:
                follower.pause()
            try:
                frozen = [f"frozen-{i}" for i in range(30)]
                answers = await send_in_bursts(producer, frozen)
            finally:
                for follower in followers:
                    follower.resume()
            assert all(isinstance(a, DeliveryTimeoutError) for a in answers), answers
            timed_out.extend(frozen)

            # Back to min.insync.replicas: another producer's acks=all write gets through.
            await wait_for(lambda: produce_acks_all(bootstrap, TOPIC, 0), timeout_s=60)
            after = [f"after-{i}" for i in range(30)]
            answers = await send_in_bursts(producer, after)
            offsets = [a for a in answers if isinstance(a, int)]
            failed = [a for a in answers if isinstance(a, BaseException)]
            assert not failed, f"{len(failed)} records failed after recovery: {failed[:3]}"
            assert offsets == sorted(offsets)
            acknowledged.extend(after)
            await producer.close()
            return offsets[-1] + 1
        finally:
            await cluster.close()

    end_offset = run(scenario(), timeout_s=150)
    rows = run(read_everything(bootstrap, TOPIC, end_offset))
    ours = [v for r in rows if (v := r["value"].decode()) in set(acknowledged + timed_out)]
    assert len(ours) == len(set(ours)), "no record is stored twice"
    assert [v for v in ours if v in set(acknowledged)] == acknowledged, "all, in order"
