"""The metadata cache's wait for the controller's first UpdateMetadata: a broker that
registered a moment ago holds a Kafka Metadata request until then (bounded), instead of
answering "no controller, no broker but me" from its empty cache."""

from __future__ import annotations

import asyncio

from brokerd.core.metadata_cache import MetadataCache
from spark_replica.wire.native.controller_requests import ControllerHeader, UpdateMetadataRequest
from spark_replica.wire.native.metadata import BrokerInfo

# controller id, controller epoch, broker epoch
HEADER = ControllerHeader(2, 1, 7)
BROKERS = [BrokerInfo(1, "h", 9092, 9093), BrokerInfo(2, "h", 9094, 9095)]


def test_a_waiting_request_goes_on_when_the_first_update_comes() -> None:
    async def scenario() -> tuple[bool, int, list[int]]:
        cache = MetadataCache()
        waiting = asyncio.create_task(cache.wait_for_first_update(5.0))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        cache.update(UpdateMetadataRequest(HEADER, BROKERS, []))
        return await waiting, cache.controller_id, sorted(cache.brokers)

    assert asyncio.run(asyncio.wait_for(scenario(), 5)) == (True, 2, [1, 2])


def test_the_wait_is_bounded_and_later_ones_are_free() -> None:
    async def scenario() -> tuple[bool, bool]:
        cache = MetadataCache()
        without = await cache.wait_for_first_update(0.01)
        cache.update(UpdateMetadataRequest(HEADER, BROKERS, []))
        return without, await cache.wait_for_first_update(0.0)

    assert asyncio.run(asyncio.wait_for(scenario(), 5)) == (False, True)
