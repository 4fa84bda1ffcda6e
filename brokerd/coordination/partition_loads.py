"""Which partitions of an internal topic this broker has loaded, following their
leadership: a partition it newly leads is read and replayed, one it stops leading is
dropped. The group coordinator (`__consumer_offsets`) and the transaction coordinator
(`__transaction_state`) each keep one.

A partition led again after another replica led it is loaded again: the other may have
written to it. A new leader epoch with no other leader between (an ISR change) keeps
what is loaded (`Partition.leadership_term`). The coordinator is told when a load is
ready and when one is dropped; until a load is ready, the keys it holds answer
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from brokerd.coordination import internal_topic
from brokerd.coordination.coalesced_appends import CoalescedAppends
from brokerd.coordination.internal_topic import InternalTopic
from spark_replica.errors import BrokerResponseError, ProtocolError, ZooKeeperError

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext
    from brokerd.replication.partition import Partition

logger = logging.getLogger("brokerd.coordination")
# How long a load that failed (a damaged segment, ZooKeeper away) waits before trying again.
LOAD_RETRY_S = 1.0


class Replayed(Protocol):
    """What a partition's records say, built by replaying them oldest first."""

    def replay(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None: ...

    def summary(self) -> str:
        """What was loaded, for the log line ("12 groups")."""
        ...


S = TypeVar("S", bound=Replayed)


@dataclass
class Load(Generic[S]):
    """A partition led here, in the leadership term it was loaded in."""

    index: int
    term: int
    appends: CoalescedAppends
    stored: S
    ready: bool = False
    task: asyncio.Task[None] | None = None


class PartitionLoads(Generic[S]):
    def __init__(
        self,
        ctx: BrokerContext,
        topic: InternalTopic,
        replayed: Callable[[], S],
        on_ready: Callable[[Load[S]], None],
        on_dropped: Callable[[int], None],
        after_replay: Callable[[Partition, S, int], Awaitable[None]] | None = None,
        open_at_end: Callable[[S, int, list[internal_topic.Record]], None] | None = None,
    ) -> None:
        """`replayed` makes the empty state a load replays into; `after_replay` (given the
        partition, that state and the topic's partition count) finishes a load before it
        is ready; `open_at_end` is given the records of each transaction still open at
        the end of the log (producer id, records), which a replay leaves out."""
        self.ctx = ctx
        self.topic = topic
        self._replayed = replayed
        self._on_ready = on_ready
        self._on_dropped = on_dropped
        self._after_replay = after_replay
        self._open_at_end = open_at_end
        self._loads: dict[int, Load[S]] = {}

    def ready(self) -> list[Load[S]]:
        return [load for load in self._loads.values() if load.ready]

    def get(self, index: int) -> Load[S] | None:
        return self._loads.get(index)

    def follow_all(self) -> None:
        """Follow every partition's leadership (after a controller request)."""
        count = self.topic.partition_count(self.ctx)
        for index in sorted(set(range(count)) | set(self._loads)):
            self.follow(index)

    def follow(self, index: int) -> Load[S] | None:
        """The load of partition `index` if this broker leads it, started if new."""
        partition = self.ctx.replicas.partitions.get(self.topic.partition(index))
        led = partition is not None and partition.is_leader
        term = partition.leadership_term if partition is not None and led else None
        load = self._loads.get(index)
        if load is not None and load.term != term:
            self.drop(index)
            load = None
        if load is None and term is not None:
            write = partial(internal_topic.append_to, self.ctx, self.topic, index)
            load = self._loads[index] = Load(index, term, CoalescedAppends(write), self._replayed())
            load.task = asyncio.create_task(
                self._load(load), name=f"{self.topic.name}-load-{index}"
            )
        return load

    def drop(self, index: int) -> None:
        load = self._loads.pop(index)
        if load.task is not None and not load.task.done():
            load.task.cancel()
        self._on_dropped(index)

    def lost(self, load: Load[S]) -> None:
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

    async def _load(self, load: Load[S]) -> None:
        tp = self.topic.partition(load.index)
        started = time.monotonic()
        while True:
            try:
                partition = self.ctx.replicas.get_partition(tp)
                stored = self._replayed()
                open_at_end = None
                if self._open_at_end is not None:
                    open_at_end = partial(self._open_at_end, stored)
                async for records in internal_topic.read_records(
                    self.topic, partition, open_at_end
                ):
                    stored.replay(records)
                count = self.topic.partition_count(self.ctx)
                if count == 0:
                    # Led before the metadata names the topic (LeaderAndIsr comes first).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.ctx.metadata.next_update(), LOAD_RETRY_S)
                    continue
                if self._after_replay is not None:
                    await self._after_replay(partition, stored, count)
                break
            except (BrokerResponseError, ZooKeeperError, ProtocolError, OSError) as exc:
                logger.warning("loading %s failed; retrying: %s", tp, exc)
                await asyncio.sleep(LOAD_RETRY_S)
        load.stored = stored
        self._on_ready(load)
        load.ready = True
        logger.info(
            "loaded %s: %s in %.0f ms",
            tp,
            stored.summary(),
            (time.monotonic() - started) * 1000,
        )
