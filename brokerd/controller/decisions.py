"""What state a partition should have now, decided from the controller's model alone.

Pure: no I/O and no changes to the context, so every case is tested with plain values.
The controller writes the decisions to ZooKeeper and records them afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokerd.controller.context import ControllerContext
from brokerd.controller.election import offline_leader, shrink_isr_without
from spark_replica.topics import TopicPartition
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
    - Leader dead: offline election; None when no replica may lead (stays offline).
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
    if current.leader in live:
        isr = list(shrink_isr_without(current.isr, set(replicas) - live))
        if isr == current.isr:
            return None
        state = znodes.PartitionState(current.leader, next_epoch, isr, ctx.epoch)
        return StateWrite(tp, state, current.zk_version)
    result = offline_leader(replicas, current.isr, live, ctx.unclean_enabled(tp.topic))
    if result is None:
        return None
    state = znodes.PartitionState(result.leader, next_epoch, list(result.isr), ctx.epoch)
    return StateWrite(tp, state, current.zk_version, unclean=result.unclean)
