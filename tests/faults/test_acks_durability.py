"""acks=all is never answered with success while fewer than min.insync.replicas hold the
batch: the ISR may shrink after the append, and the HW then passes over a single copy."""

from __future__ import annotations

import pytest

from spark_replica.client import BrokerConnection
from spark_replica.errors import NotEnoughReplicasAfterAppendError
from spark_replica.records import build_batch
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.support import BrokerFactory, create, leadership, run, start_cluster, wait_for

pytestmark = pytest.mark.slow

TOPIC = "durable"
# Long enough for the ISR to shrink (lag 2 s, checked every second) well before it ends.
PRODUCE_TIMEOUT_MS = 20_000


async def produce_raw(address: tuple[str, int], value: str) -> int:
    """One acks=all produce to partition 0; the partition's error code (0 is success)."""
    conn = BrokerConnection(*address)
    await conn.connect()
    try:
        request = ProduceRequest(
            -1,
            PRODUCE_TIMEOUT_MS,
            [ProduceTopic(TOPIC, [ProducePartition(0, build_batch([value]))])],
        )
        response = await conn.send(request, timeout_s=PRODUCE_TIMEOUT_MS / 1000 + 10)
        return response.topics[0].partitions[0].error_code
    finally:
        await conn.close()


def test_isr_shrinking_below_min_after_append_is_not_acknowledged(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def in_sync() -> int | None:
        state = (await leadership(bootstrap, TOPIC))[0]
        return state["leader"] if sorted(state["isr"]) == [1, 2, 3] else None

    async def setup() -> int:
        await create(bootstrap, TOPIC, rf=3, **{"min.insync.replicas": "2"})
        leader = await wait_for(in_sync)
        address = (brokers.brokers[leader].host, brokers.brokers[leader].port)
        assert await produce_raw(address, "replicated-to-all") == 0
        return await wait_for(in_sync)

    leader = run(setup())
    followers = [b for broker_id, b in brokers.brokers.items() if broker_id != leader]
    address = (brokers.brokers[leader].host, brokers.brokers[leader].port)
    for follower in followers:
        follower.pause()
    try:
        # Appended while the ISR is still full; the followers never copy it, the ISR
        # shrinks to the leader alone, and the HW passes the batch with one copy.
        code = run(produce_raw(address, "one-copy-only"), timeout_s=60)
    finally:
        for follower in followers:
            follower.resume()
    assert code == NotEnoughReplicasAfterAppendError.code
