"""What state a partition should have now, decided from the controller's model alone.

Pure: no I/O and no changes to the context, so every case is tested with plain values.
The controller writes the decisions to ZooKeeper and records them afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokerd.controller.context import ControllerContext
from brokerd.controller.election import (
    controlled_shutdown_leader,
    isr_without_restarted,
    offline_leader,
    preferred_leader,
    shrink_isr_without,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.metadata import NO_LEADER
from spark_replica.zk import znodes


@dataclass(frozen=True)
class StateWrite:
    """A leaderAndISR state to write; `expected_version` None creates the znode."""

    tp: TopicPartition
    state: znodes.PartitionState
    expected_version: int | None
    unclean: bool = False


def next_state(ctx: ControllerContext, tp: TopicPartition) -> StateWrite | None:
    """The state `tp` should move to, or None if it is fine as it is or cannot lead.

    - No state yet (a new partition): the first live replica leads, the ISR is every live
      replica, epoch 0.
    - Leader alive: dead replicas leave the ISR (with a new leader epoch).
    - Leader dead: offline election. When no replica may lead, the state says so: leader
      NO_LEADER with the ISR kept as it was (its members hold every acknowledged record),
      at a new epoch; None once it says so already. Recording the death is what makes
      the return of an ISR member an election like any other (new epoch, every replica
      told) rather than "leader live, nothing to do".
    - Replicas that restarted since the state was written (ctx.restarted_since_state)
      count as having died then: they leave the ISR, a restarted leader is replaced, and
      a NO_LEADER state keeps only the members that did not restart (unless all did).
    """
    replicas = ctx.assignments[tp]
    live = ctx.live_ids
    current = ctx.leadership.get(tp)
    if current is None:
        live_replicas = [r for r in replicas if r in live]
        if not live_replicas:
            return None
        return StateWrite(
            tp, znodes.PartitionState(live_replicas[0], 0, live_replicas, ctx.epoch), None
        )
    next_epoch = current.state.leader_epoch + 1
    restarted = ctx.restarted_since_state(tp)
    if current.leader in live and current.leader not in restarted:
        isr = list(shrink_isr_without(current.isr, (set(replicas) - live) | restarted))
        if isr == current.isr:
            return None
        state = znodes.PartitionState(current.leader, next_epoch, isr, ctx.epoch)
        return StateWrite(tp, state, current.zk_version)
    result = offline_leader(
        replicas, current.isr, live, ctx.unclean_enabled(tp.topic), restarted=restarted
    )
    if result is None:
        if current.leader == NO_LEADER:
            return None
        isr = list(isr_without_restarted(current.isr, restarted))
        state = znodes.PartitionState(NO_LEADER, next_epoch, isr, ctx.epoch)
        return StateWrite(tp, state, current.zk_version)
    state = znodes.PartitionState(result.leader, next_epoch, list(result.isr), ctx.epoch)
    return StateWrite(tp, state, current.zk_version, unclean=result.unclean)


def reelection_state(ctx: ControllerContext, tp: TopicPartition) -> StateWrite | None:
    """A new election for a partition whose leader stepped down (see isr_writer.py).

    The leader named in ZooKeeper keeps leading if it is live, with dead replicas out of
    the ISR, at a new epoch: only a newer epoch makes it (and every replica) take the
    state again. A dead leader, or one restarted since the state, gets the offline
    election of next_state.
    """
    current = ctx.leadership.get(tp)
    restarted = ctx.restarted_since_state(tp)
    if current is None or current.leader not in ctx.live_ids or current.leader in restarted:
        return next_state(ctx, tp)
    gone = (set(ctx.assignments[tp]) - ctx.live_ids) | restarted
    isr = list(shrink_isr_without(current.isr, gone))
    state = znodes.PartitionState(current.leader, current.state.leader_epoch + 1, isr, ctx.epoch)
    return StateWrite(tp, state, current.zk_version)


def preferred_state(ctx: ControllerContext, tp: TopicPartition) -> StateWrite | None:
    """Leadership back to the preferred replica, if it is elsewhere and the preferred one
    is alive and in sync; None otherwise."""
    current = ctx.leadership.get(tp)
    replicas = ctx.assignments.get(tp, [])
    if current is None or not replicas or current.leader == replicas[0]:
        return None
    isr = shrink_isr_without(current.isr, ctx.restarted_since_state(tp))
    result = preferred_leader(replicas, isr, ctx.live_ids)
    if result is None:
        return None
    state = znodes.PartitionState(
        result.leader, current.state.leader_epoch + 1, list(current.isr), ctx.epoch
    )
    return StateWrite(tp, state, current.zk_version)


def imbalanced_brokers(
    ctx: ControllerContext, threshold_percent: int
) -> dict[int, list[TopicPartition]]:
    """Per broker, the partitions it should lead but does not, where that share of the
    partitions it is preferred for exceeds `threshold_percent` (Kafka's
    leader.imbalance.per.broker.percentage)."""
    preferred: dict[int, list[TopicPartition]] = {}
    for tp, replicas in ctx.assignments.items():
        if replicas and tp in ctx.leadership:
            preferred.setdefault(replicas[0], []).append(tp)
    imbalanced = {}
    for broker, partitions in preferred.items():
        misplaced = [tp for tp in partitions if ctx.leadership[tp].leader != broker]
        if misplaced and len(misplaced) * 100 > threshold_percent * len(partitions):
            imbalanced[broker] = sorted(misplaced)
    return imbalanced


def controlled_shutdown_state(ctx: ControllerContext, tp: TopicPartition) -> StateWrite | None:
    """Leadership away from brokers shutting down, and those brokers out of the ISR.

    None when nothing needs to change, or when no other in-sync replica can take over
    (the partition stays with the departing broker until it is gone).
    """
    current = ctx.leadership.get(tp)
    if current is None or not ctx.shutting_down.intersection([*current.isr, current.leader]):
        return None
    next_epoch = current.state.leader_epoch + 1
    if current.leader in ctx.shutting_down:
        result = controlled_shutdown_leader(
            ctx.assignments[tp], current.isr, ctx.live_ids, ctx.shutting_down
        )
        if result is None:
            return None
        state = znodes.PartitionState(result.leader, next_epoch, list(result.isr), ctx.epoch)
        return StateWrite(tp, state, current.zk_version)
    isr = list(shrink_isr_without(current.isr, ctx.shutting_down))
    state = znodes.PartitionState(current.leader, next_epoch, isr, ctx.epoch)
    return StateWrite(tp, state, current.zk_version)
