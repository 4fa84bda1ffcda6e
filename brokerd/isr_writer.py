"""Writing leaders' ISR changes to ZooKeeper, conditionally, off the event loop.

A leader proposes an ISR change (a follower caught up, or fell behind); this writer puts
it in the partition's leaderAndISR znode, conditional on the zkVersion the leader was
given. Success makes the change real (and is announced to the controller through an ISR
change notification, which it turns into UpdateMetadata for every broker). A failed
condition means someone else, the controller, wrote the znode since: this broker's view
of the partition is stale, so it stops acting as leader until the controller tells it
what it is (the zombie-leader fence).
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError

from brokerd.partition import Partition
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes

logger = logging.getLogger("brokerd.isr")


def write_isr(
    zk: KazooClient, tp: TopicPartition, state: znodes.PartitionState, expected_version: int
) -> int | None:
    """Conditionally write `state`; its new zkVersion, or None if the condition failed."""
    path = znodes.partition_state_path(tp.topic, tp.partition)
    try:
        stat = zk.set(path, state.encode(), version=expected_version)
    except (BadVersionError, NoNodeError):
        return None
    return stat.version


def notify_isr_change(zk: KazooClient, partitions: list[TopicPartition]) -> None:
    notification = znodes.IsrChangeNotification([(tp.topic, tp.partition) for tp in partitions])
    zk.create(znodes.ISR_CHANGE_PREFIX, notification.encode(), sequence=True, makepath=True)


class IsrWriter:
    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._pending: dict[TopicPartition, Partition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def schedule(self, partition: Partition) -> None:
        self._pending[partition.tp] = partition
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            pending, self._pending = self._pending, {}
            changed = []
            for partition in pending.values():
                try:
                    if await self._write(partition):
                        changed.append(partition.tp)
                except Exception:
                    logger.exception("writing the ISR of %s failed; will retry", partition.tp)
                    partition.proposed_isr = None
            if changed:
                try:
                    await asyncio.to_thread(notify_isr_change, self.zk, changed)
                except Exception:
                    logger.exception("could not notify the controller of ISR changes")

    async def _write(self, partition: Partition) -> bool:
        proposed = partition.proposed_isr
        if proposed is None or not partition.is_leader:
            return False
        epoch, expected = partition.leader_epoch, partition.zk_version
        state = znodes.PartitionState(self.broker_id, epoch, proposed, partition.controller_epoch)
        version = await asyncio.to_thread(write_isr, self.zk, partition.tp, state, expected)
        if partition.leader_epoch != epoch or not partition.is_leader:
            return version is not None
        if version is None:
            partition.step_down()
            return False
        logger.info("%s: ISR now %s (zkVersion %d)", partition.tp, proposed, version)
        partition.apply_isr(proposed, version)
        return True
