"""A consumer that looks up its starting offsets while the leader dies rides through it.

Kafka's consumer retries its offset lookups until `default.api.timeout.ms`; ours used
to fail on the first refused connection, so `replog consume` started a moment after a
leader crash exited with "cannot connect to broker".
"""

from __future__ import annotations

import time

import pytest

from spark_replica.client import Cluster, Consumer
from tests.support import BrokerFactory, create, leadership, produce, run, start_cluster

pytestmark = pytest.mark.slow

RECORDS = 10
READ_WITHIN_S = 45


def test_offset_lookups_ride_through_a_leader_crash(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> int:
        await create(bootstrap, "lookups", rf=3, **{"min.insync.replicas": "2"})
        await produce(bootstrap, "lookups", [f"v{i}" for i in range(RECORDS)])
        leader = (await leadership(bootstrap, "lookups"))[0]["leader"]
        live = [(b.host, b.port) for i, b in brokers.brokers.items() if i != leader]
        cluster = Cluster(live)
        try:
            consumer = Consumer(cluster)
            await consumer.assign_topic("lookups")  # metadata still names the old leader
            brokers.brokers[leader].kill()
            await consumer.seek_to_beginning()
            read = 0
            deadline = time.monotonic() + READ_WITHIN_S
            while read < RECORDS and time.monotonic() < deadline:
                read += sum(chunk.records.num_rows for chunk in await consumer.poll())
            return read
        finally:
            await cluster.close()

    assert run(scenario(), timeout_s=120) == RECORDS
