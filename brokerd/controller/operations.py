"""What every event handler does: decide states, write them, record them, tell brokers.

One ControllerOps exists per controllership: the controller creates it on winning the
election and drops it on resigning, so a handler holding one always has a context. It
is used only by the controller's event task (see controller.py), like the context it
carries. ZooKeeper calls block and run in worker threads; requests to brokers are only
queued (channel.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kazoo.client import KazooClient

from brokerd.controller import zk_store
from brokerd.controller.channel import ControllerChannel, RequestBatch
from brokerd.controller.context import ControllerContext
from brokerd.controller.decisions import StateWrite, next_state
from brokerd.controller.states import PartitionState, ReplicaState
from brokerd.metrics.registry import BrokerMetrics
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    StopReplicaRequest,
    StopReplicaTopic,
)

logger = logging.getLogger("brokerd.controller")

# A decision whose conditional write keeps conflicting is re-read and retried this often.
MAX_DECISION_ROUNDS = 5

Decide = Callable[[ControllerContext, TopicPartition], StateWrite | None]


@dataclass
class ControllerOps:
    zk: KazooClient
    ctx: ControllerContext
    channel: ControllerChannel
    # Watches the topics' assignment znodes for this controllership (controller.py;
    # blocking).
    watch_topics: Callable[[list[str]], None]
    metrics: BrokerMetrics

    def mark_replicas(
        self, partitions: list[TopicPartition], brokers: set[int] | None, target: ReplicaState
    ) -> None:
        refused = self.ctx.mark_replicas(partitions, brokers, target)
        if refused:
            logger.warning("refused replica transitions to %s: %s", target.name, refused)

    def announce(self, changed: list[TopicPartition]) -> None:
        """LeaderAndIsr for `changed` to their live replicas, then UpdateMetadata to all."""
        batch = RequestBatch(self.ctx)
        batch.add_leader_and_isr(changed)
        batch.add_update_metadata()
        self.channel.send(batch)

    async def elect(
        self, partitions: list[TopicPartition], decide: Decide = next_state
    ) -> list[TopicPartition]:
        """Decide and write new states for `partitions`; return those whose state changed.

        A write that conflicts (someone wrote the znode since we read it) is re-read and
        decided again, at most MAX_DECISION_ROUNDS times. Its time, from the first
        decision to the last write, is the leader election time of the metrics (when
        anything was written).
        """
        ctx = self.ctx
        started = time.monotonic()
        unclean = 0
        changed: list[TopicPartition] = []
        pending = [tp for tp in partitions if tp in ctx.assignments]
        for _ in range(MAX_DECISION_ROUNDS):
            writes = [w for w in (decide(ctx, tp) for tp in pending) if w is not None]
            deciding = {w.tp for w in writes}
            offline = [
                tp
                for tp in pending
                if tp in ctx.leadership
                and ctx.leadership[tp].leader not in ctx.live_brokers
                and tp not in deciding
            ]
            ctx.partition_states.transition(offline, PartitionState.OFFLINE)
            if not writes:
                break
            outcome = await asyncio.to_thread(
                zk_store.write_states, self.zk, ctx.epoch_zk_version, writes
            )
            ctx.zk_round_trips += outcome.round_trips
            ctx.leadership.update(outcome.written)
            _moved, refused = ctx.partition_states.transition(
                outcome.written, PartitionState.ONLINE
            )
            if refused:
                logger.warning("refused partition transitions to ONLINE: %s", refused)
            changed.extend(outcome.written)
            unclean += self._count_unclean(writes, outcome.written)
            if not outcome.conflicts:
                break
            ctx.leadership.update(
                await asyncio.to_thread(zk_store.read_states, self.zk, outcome.conflicts)
            )
            pending = outcome.conflicts
        if changed:
            self.metrics.leader_election((time.monotonic() - started) * 1000, unclean)
        return changed

    def _count_unclean(self, writes: list[StateWrite], written: Collection[TopicPartition]) -> int:
        """Log each unclean election written; return how many there were."""
        count = 0
        for write in writes:
            if write.unclean and write.tp in written:
                count += 1
                self.ctx.unclean_elections += 1
                logger.warning(
                    "unclean leader election for %s: %d leads (%d so far)",
                    write.tp,
                    write.state.leader,
                    self.ctx.unclean_elections,
                )
        return count

    async def delete_replicas(self, on_broker: dict[int, list[TopicPartition]]) -> list[int]:
        """StopReplica(delete) for the given replicas of each live broker; those that
        confirmed. Brokers that are down delete them when they start (no longer assigned)."""
        ctx = self.ctx
        calls = {}
        for broker, partitions in on_broker.items():
            if broker not in ctx.live_brokers:
                continue
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            header = ControllerHeader(ctx.broker_id, ctx.epoch, ctx.live_brokers[broker].epoch)
            request = StopReplicaRequest(
                header, True, [StopReplicaTopic(t, numbers) for t, numbers in by_topic.items()]
            )
            calls[broker] = self.channel.call(ctx, broker, request)
        return sorted([broker for broker, call in calls.items() if await call])
