"""Answering a topic change only once this broker serves it, as Kafka does.

Kafka answers CreateTopics and CreatePartitions (with a timeout_ms above 0) only when the
answering broker's metadata names a leader for every partition asked for, or with
REQUEST_TIMED_OUT for a topic still lacking one at the timeout (its
DelayedCreatePartitions); the topic is created either way. DeleteTopics is answered once
the topic is gone from the metadata (its DelayedDeleteTopics), so that a client may
create the name again at once. Clients rely on it: Faust
creates a table's changelog topic and reads its partition count from the very next
Metadata answer, and one that came before the controller's UpdateMetadata reached this
broker left the table with no partitions for good.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from brokerd.core.metadata_cache import MetadataCache


async def without_leaders(
    cache: MetadataCache, wanted: Mapping[str, int], timeout_s: float
) -> set[str]:
    """The topics of `wanted` (name → partition count) some of whose partitions still
    have no leader in `cache` after up to `timeout_s`; none once all have one."""

    def missing() -> set[str]:
        return {topic for topic, count in wanted.items() if not cache.has_leaders(topic, count)}

    return await _unsettled_after(cache, missing, timeout_s)


async def still_present(cache: MetadataCache, topics: set[str], timeout_s: float) -> set[str]:
    """The `topics` still in `cache` after up to `timeout_s`; none once all are gone."""

    def present() -> set[str]:
        return {topic for topic in topics if cache.partitions_of(topic)}

    return await _unsettled_after(cache, present, timeout_s)


async def _unsettled_after(
    cache: MetadataCache, unsettled: Callable[[], set[str]], timeout_s: float
) -> set[str]:
    """What `unsettled()` still names after up to `timeout_s`, looking again at each
    metadata update; nothing once it names nothing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        left = unsettled()
        remaining = deadline - loop.time()
        if not left or remaining <= 0:
            return left
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cache.next_update(), remaining)
