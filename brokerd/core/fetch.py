"""The read core both listeners' fetches wait through: the long poll and its caps.

A fetch answers at once when there is data (or an error); else it waits for a change of
the partitions it reads, up to its max_wait. Each dialect reads its partitions its own
way (replog's sends stored batches, brokerd/native/fetch.py; Kafka's converts them,
brokerd/kafka/fetch.py) and hands that read to `long_poll`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from brokerd.core.context import BrokerContext
from brokerd.replication.partition import Partition, wait_for_change
from spark_replica.errors import InvalidFetchSizeError
from spark_replica.topics import TopicPartition

# A fetch never parks longer than this, whatever max_wait_ms says.
MAX_WAIT_CAP_MS = 30_000
# Nor answers more than this, whatever max_bytes says (Kafka's fetch.max.bytes default).
FETCH_MAX_BYTES = 57_671_680

T = TypeVar("T")


async def long_poll(
    read_all: Callable[[], tuple[T, int, list[Partition]]],
    max_wait_ms: int,
    min_bytes: int,
    *,
    high_watermark: bool = True,
) -> T:
    """Answer at once if there is data (or an error); else wait for a change, up to max_wait.

    `read_all` reads every requested partition once and returns the answer, the bytes
    it holds and the partitions whose change would be worth another read. Both
    listeners' fetches wait through here. A follower's fetch passes
    `high_watermark=False`: a HW move alone does not answer it (wait_for_change).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    while True:
        response, total_bytes, watched = read_all()
        remaining = deadline - loop.time()
        if total_bytes >= min_bytes or remaining <= 0 or not watched:
            return response
        if not await wait_for_change(watched, remaining, high_watermark=high_watermark):
            response, _, _ = read_all()
            return response


def partition_to_read(
    ctx: BrokerContext,
    tp: TopicPartition,
    max_bytes: int,
    partition_max_bytes: int,
    current_leader_epoch: int,
) -> Partition:
    """The led partition a fetch reads, once the request's sizes and the leader epoch it
    names are checked; else the typed error that is the partition's answer."""
    if max_bytes <= 0 or partition_max_bytes <= 0:
        raise InvalidFetchSizeError(
            f"max_bytes must be positive (request {max_bytes}, partition {partition_max_bytes})"
        )
    partition = ctx.replicas.get_partition(tp)
    partition.require_leader()
    partition.check_leader_epoch(current_leader_epoch)
    return partition
