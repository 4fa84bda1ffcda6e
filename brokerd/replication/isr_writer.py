"""Writing leaders' ISR changes to ZooKeeper, conditionally, off the event loop.

A leader proposes an ISR change (a follower caught up, or fell behind); this writer puts
it in the partition's leaderAndISR znode, conditional on the zkVersion the leader was
given. Success makes the change real (and is announced to the controller through an ISR
change notification, which it turns into UpdateMetadata for every broker).

A failed condition (BadVersion), or a reply that never came (ConnectionLoss: the write
may or may not have landed), is settled by reading the znode back. The controller never
writes a state without bumping its leader epoch, so a znode that names this broker as
leader at the epoch it leads is this broker's own write: an earlier one whose reply was
lost, or this one. The leader then adopts what the znode holds (ISR and zkVersion) and
goes on. Anything else means someone else, the controller, decided since: this broker's
view is stale, so it stops acting as leader (the zombie-leader fence) and says so in an
ISR change notification marked `leader_stepped_down`. The controller answers that with
a new election at a bumped epoch, so a partition never stays without an acting leader
because its LeaderAndIsr went astray. If the read-back fails too, the proposal is
dropped and made again later; that write then settles the earlier one the same way.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from kazoo.client import KazooClient

from brokerd.metrics.registry import BrokerMetrics
from brokerd.replication.partition import Partition
from spark_replica.errors import ZnodeMissingError, ZnodeVersionError, ZooKeeperConnectionError
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import translated
from spark_replica.zk.multi_read import get_many

logger = logging.getLogger("brokerd.isr")

# A step-down notification that could not be posted is tried again after this long.
RETRY_NOTIFY_S = 1.0


def is_own_write(written: znodes.PartitionState, found: znodes.PartitionState) -> bool:
    """Whether `found`, read back after an uncertain write of `written`, is this leader's:
    same leader at the same leader epoch (the controller always bumps the epoch)."""
    return found.leader == written.leader and found.leader_epoch == written.leader_epoch


@dataclass(frozen=True)
class IsrWrite:
    tp: TopicPartition
    state: znodes.PartitionState
    expected_version: int


Held = tuple[znodes.PartitionState, int] | None


def write_isrs(zk: KazooClient, writes: list[IsrWrite]) -> list[Held]:
    """Conditionally write each state; per write, the state the znode holds as this
    leader's own with its zkVersion, or None if someone else wrote it (or it is gone).

    The writes are independent (each conditional on its own zkVersion) and pipelined: a
    broker that just restarted catches up on thousands of partitions at once, and wrote
    their ISRs one round trip after another (minutes at 10,000 partitions). Those refused
    or unanswered are settled by reading them back, together.
    """
    paths = [znodes.partition_state_path(w.tp.topic, w.tp.partition) for w in writes]
    with translated():
        pending = [
            zk.set_async(path, w.state.encode(), version=w.expected_version)
            for path, w in zip(paths, writes, strict=True)
        ]
    held: list[Held] = []
    unsettled: list[int] = []
    for i, (write, answer) in enumerate(zip(writes, pending, strict=True)):
        try:
            with translated():
                held.append((write.state, answer.get().version))
        except ZnodeMissingError:
            held.append(None)
        except (ZnodeVersionError, ZooKeeperConnectionError):
            held.append(None)
            unsettled.append(i)
    found = get_many(zk, [paths[i] for i in unsettled])
    for i, read in zip(unsettled, found, strict=True):
        if read is None:
            continue
        state = znodes.PartitionState.decode(paths[i], read[0])
        if is_own_write(writes[i].state, state):
            held[i] = (state, read[1].version)
    return held


def notify_isr_change(
    zk: KazooClient, partitions: list[TopicPartition], leader_stepped_down: bool = False
) -> None:
    notification = znodes.IsrChangeNotification(
        [(tp.topic, tp.partition) for tp in partitions], leader_stepped_down
    )
    with translated():
        zk.create(znodes.ISR_CHANGE_PREFIX, notification.encode(), sequence=True, makepath=True)


class IsrWriter:
    def __init__(self, zk: KazooClient, broker_id: int, metrics: BrokerMetrics) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.metrics = metrics
        self._pending: dict[TopicPartition, Partition] = {}
        self._stepped_down: list[TopicPartition] = []
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
            changed = await self._write([p for p in pending.values() if self._proposes(p)])
            await self._notify(changed, leader_stepped_down=False)
            stepped_down, self._stepped_down = self._stepped_down, []
            if not await self._notify(stepped_down, leader_stepped_down=True):
                self._stepped_down.extend(stepped_down)
                asyncio.get_running_loop().call_later(RETRY_NOTIFY_S, self._wakeup.set)

    async def _notify(self, partitions: list[TopicPartition], leader_stepped_down: bool) -> bool:
        """Post one notification (if there is anything to say); False if it failed."""
        if not partitions:
            return True
        try:
            await asyncio.to_thread(notify_isr_change, self.zk, partitions, leader_stepped_down)
        except Exception:
            logger.exception("could not notify the controller of %s", partitions)
            return False
        return True

    @staticmethod
    def _proposes(partition: Partition) -> bool:
        return partition.proposed_isr is not None and partition.is_leader

    async def _write(self, partitions: list[Partition]) -> list[TopicPartition]:
        """Write the proposed ISRs; the partitions whose ISR changed."""
        if not partitions:
            return []
        asked = [(p, p.leader_epoch) for p in partitions]
        writes = [
            IsrWrite(
                p.tp,
                znodes.PartitionState(
                    self.broker_id, p.leader_epoch, list(p.proposed_isr or []), p.controller_epoch
                ),
                p.zk_version,
            )
            for p in partitions
        ]
        try:
            held_all = await asyncio.to_thread(write_isrs, self.zk, writes)
        except Exception:
            logger.exception("writing the ISRs of %d partitions failed; will retry", len(writes))
            for partition in partitions:
                partition.proposed_isr = None
            return []
        changed = []
        for (partition, epoch), held in zip(asked, held_all, strict=True):
            if partition.leader_epoch != epoch or not partition.is_leader:
                if held is not None:
                    changed.append(partition.tp)
                continue
            if held is None:
                partition.step_down()
                self._stepped_down.append(partition.tp)
                continue
            held_state, version = held
            logger.info("%s: ISR now %s (zkVersion %d)", partition.tp, held_state.isr, version)
            self.metrics.isr_changed(partition.isr, held_state.isr)
            partition.apply_isr(held_state.isr, version)
            changed.append(partition.tp)
        return changed
