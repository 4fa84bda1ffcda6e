"""brokerd/core/leader_wait.py with a metadata cache fed by hand: a topic change is
answered as soon as an UpdateMetadata gives each partition asked for a leader, and the
topics still lacking one are named when the timeout runs out."""

from __future__ import annotations

import asyncio

from brokerd.core.leader_wait import without_leaders
from brokerd.core.metadata_cache import MetadataCache
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    PartitionLeaderState,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo

NO_LEADER = -1


def update(leaders: dict[str, list[int]]) -> UpdateMetadataRequest:
    """An UpdateMetadata naming each topic's partitions, with these leaders in order."""
    return UpdateMetadataRequest(
        ControllerHeader(1, 1, 1),
        [BrokerInfo(1, "localhost", 9092)],
        [
            TopicLeaderStates(
                topic,
                [PartitionLeaderState(p, leader, 0, [1], 0, [1]) for p, leader in enumerate(ls)],
            )
            for topic, ls in leaders.items()
        ],
    )


def test_nothing_is_waited_for_when_every_partition_has_a_leader() -> None:
    cache = MetadataCache()
    cache.update(update({"served": [1, 1]}))
    assert asyncio.run(without_leaders(cache, {"served": 2}, timeout_s=0)) == set()


def test_the_wait_ends_with_the_update_that_gives_the_last_leader() -> None:
    cache = MetadataCache()

    async def scenario() -> tuple[set[str], float]:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, cache.update, update({"new": [1, NO_LEADER]}))
        loop.call_later(0.1, cache.update, update({"new": [1, 1], "other": [1]}))
        started = loop.time()
        missing = await without_leaders(cache, {"new": 2}, timeout_s=30)
        return missing, loop.time() - started

    missing, waited_s = asyncio.run(scenario())
    assert missing == set()
    assert waited_s < 5


def test_topics_still_without_leaders_at_the_timeout_are_named() -> None:
    cache = MetadataCache()
    cache.update(update({"grown": [1, 1], "leaderless": [NO_LEADER]}))
    # "grown" asked for 3 partitions: the third is not known yet.
    missing = asyncio.run(
        without_leaders(cache, {"grown": 3, "leaderless": 1, "absent": 1}, timeout_s=0.1)
    )
    assert missing == {"grown", "leaderless", "absent"}
