"""A native Metadata request reaching a broker that has not yet had the controller's
first UpdateMetadata is held until it has (as the Kafka listener's is), instead of being
answered from the empty cache: "no controller, no broker but me", which a client would
take for the cluster. The controller is paused while the newcomer registers, so its
first UpdateMetadata comes a second late."""

from __future__ import annotations

import asyncio

import pytest

from spark_replica.client import Cluster
from tests.support import BrokerFactory, controller_of, run, start_cluster

pytestmark = pytest.mark.slow

# Long enough that the paused controller keeps its session and its role.
SESSION = {"zookeeper.session.timeout.ms": "30000"}
LATE_S = 1.0


def test_a_broker_that_just_registered_names_the_controller_and_every_broker(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers, 2, **SESSION)
    controller = brokers.brokers[controller_of(brokers.zk_connect)]
    controller.pause()
    resumed = False
    try:
        newcomer = brokers.start(3, **SESSION)

        async def scenario() -> tuple[int, list[int]]:
            nonlocal resumed
            cluster = Cluster([(newcomer.reachable_host, newcomer.port)])
            try:
                asked = asyncio.create_task(cluster.refresh())
                await asyncio.sleep(LATE_S)  # the request has reached the newcomer
                controller.resume()
                resumed = True
                answer = await asked
                return answer.controller_id, sorted(b.broker_id for b in answer.brokers)
            finally:
                await cluster.close()

        controller_id, broker_ids = run(scenario())
    finally:
        if not resumed:
            controller.resume()
    assert controller_id == controller.broker_id
    assert broker_ids == [1, 2, 3]
