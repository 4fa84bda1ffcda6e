"""Which partitions of `__consumer_offsets` this broker has loaded, following their
leadership: a partition it newly leads is read and replayed (and offsets an earlier
version left in ZooKeeper moved over), one it stops leading is dropped.

A partition led again after another replica led it is loaded again: the other may have
written to it. A new leader epoch with no other leader between (an ISR change) keeps
what is loaded (`Partition.leadership_term`). The coordinator is told when a load is
ready (it restores the groups' membership) and when one is dropped (it drops the groups);
until a load is ready, its groups answer COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from brokerd.groups import offsets_topic
from brokerd.groups.coalesced_appends import CoalescedAppends
from brokerd.groups.stored_groups import StoredGroups
from brokerd.groups.zookeeper_migration import migrate_partition
from spark_replica.errors import BrokerResponseError, ProtocolError, ZooKeeperError

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext

logger = logging.getLogger("brokerd.groups")
# How long a load that failed (a damaged segment, ZooKeeper away) waits before trying again.
LOAD_RETRY_S = 1.0


@dataclass
class Load:
    """An offsets partition led here, in the leadership term it was loaded in."""

    index: int
    term: int
    appends: CoalescedAppends
    stored: StoredGroups = field(default_factory=StoredGroups)
    ready: bool = False
    task: asyncio.Task[None] | None = None


class PartitionLoads:
    def __init__(
        self,
        ctx: BrokerContext,
        on_ready: Callable[[Load], None],
        on_dropped: Callable[[int], None],
    ) -> None:
        self.ctx = ctx
        self._on_ready = on_ready
        self._on_dropped = on_dropped
        self._loads: dict[int, Load] = {}

    def ready(self) -> list[Load]:
        return [load for load in self._loads.values() if load.ready]

    def get(self, index: int) -> Load | None:
        return self._loads.get(index)

    def follow_all(self) -> None:
        """Follow every offsets partition's leadership (after a controller request)."""
        count = offsets_topic.partition_count(self.ctx)
        for index in sorted(set(range(count)) | set(self._loads)):
            self.follow(index)

    def follow(self, index: int) -> Load | None:
        """The load of offsets partition `index` if this broker leads it, started if new."""
        partition = self.ctx.replicas.partitions.get(offsets_topic.offsets_partition(index))
        led = partition is not None and partition.is_leader
        term = partition.leadership_term if partition is not None and led else None
        load = self._loads.get(index)
        if load is not None and load.term != term:
            self.drop(index)
            load = None
        if load is None and term is not None:
            appends = CoalescedAppends(partial(offsets_topic.append_to, self.ctx, index))
            load = self._loads[index] = Load(index, term, appends)
            load.task = asyncio.create_task(self._load(load), name=f"offsets-load-{index}")
        return load

    def drop(self, index: int) -> None:
        load = self._loads.pop(index)
        if load.task is not None and not load.task.done():
            load.task.cancel()
        self._on_dropped(index)

    def lost(self, load: Load) -> None:
        """An append found the partition led elsewhere: drop it now, if still this load."""
        if self._loads.get(load.index) is load:
            self.drop(load.index)

    async def stop(self) -> None:
        tasks = [load.task for load in self._loads.values() if load.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for index in list(self._loads):
            self.drop(index)

    async def _load(self, load: Load) -> None:
        tp = offsets_topic.offsets_partition(load.index)
        started = time.monotonic()
        while True:
            try:
                partition = self.ctx.replicas.get_partition(tp)
                stored = StoredGroups()
                async for records in offsets_topic.read_records(self.ctx, partition):
                    stored.replay(records)
                count = offsets_topic.partition_count(self.ctx)
                if count == 0:
                    # Led before the metadata names the topic (LeaderAndIsr comes first).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.ctx.metadata.next_update(), LOAD_RETRY_S)
                    continue
                await migrate_partition(self.ctx, partition, stored, count)
                break
            except (BrokerResponseError, ZooKeeperError, ProtocolError, OSError) as exc:
                logger.warning("loading %s failed; retrying: %s", tp, exc)
                await asyncio.sleep(LOAD_RETRY_S)
        load.stored = stored
        self._on_ready(load)
        load.ready = True
        logger.info(
            "loaded %s: %d groups in %.0f ms%s",
            tp,
            len(stored.groups),
            (time.monotonic() - started) * 1000,
            f" ({stored.skipped} records that did not decode skipped)" if stored.skipped else "",
        )
