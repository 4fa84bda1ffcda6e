"""A paused (SIGSTOPped) broker accepts connections but never answers: clients must not
wait on it for a whole request timeout when other brokers can answer."""

from __future__ import annotations

import pytest

from spark_replica.client import Cluster
from tests.support import BrokerFactory, create, run, start_cluster

pytestmark = pytest.mark.slow


def test_metadata_comes_from_another_broker_while_the_first_is_paused(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers)
    run(create(brokers.bootstrap, "paused", partitions=3))
    brokers.brokers[1].pause()
    try:

        async def refresh_twice() -> int:
            cluster = Cluster(brokers.bootstrap)  # broker 1, the paused one, comes first
            try:
                await cluster.refresh(["paused"])
                # The second refresh skips broker 1 at once: it was unresponsive.
                response = await cluster.refresh(["paused"])
                return len(response.topics[0].partitions)
            finally:
                await cluster.close()

        # Well below the 30 s request timeout that a stalled connection used to cost.
        assert run(refresh_twice(), timeout_s=15) == 3
    finally:
        brokers.brokers[1].resume()
