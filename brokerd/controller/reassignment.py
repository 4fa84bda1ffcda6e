"""Partition reassignment decisions (seed section F), pure like decisions.py.

A partition moves from its original replicas (OAR) to the target replicas (RAR) in
steps that can each be repeated, so a new controller resumes from whatever ZooKeeper
shows after a failover:

1. Start: the assignment becomes RAR followed by the OAR replicas not in RAR, the leader
   epoch is bumped (leader and ISR unchanged) and every replica is told, so the new
   replicas start fetching from the leader.
2. Wait until every RAR replica is in the ISR (the leader adds them once caught up).
3. Finish: a state whose ISR keeps only RAR replicas and whose leader is in RAR (the
   current one if it stays, else the reassign election); then StopReplica(delete) to the
   removed replicas, the assignment becomes RAR, and the partition leaves the plan.

The leader epoch is bumped at every step so that the brokers apply the new replica list
and followers of a replaced leader truncate correctly.
"""

from __future__ import annotations

from collections.abc import Sequence

from brokerd.controller.context import ControllerContext
from brokerd.controller.decisions import StateWrite
from brokerd.controller.election import reassign_leader
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes


def replicas_while_moving(original: Sequence[int], target: Sequence[int]) -> list[int]:
    """The assignment during a move: the target first (its first replica is the preferred
    leader once the move is done), then the replicas that will leave."""
    return [*target, *(r for r in original if r not in target)]


def is_caught_up(ctx: ControllerContext, tp: TopicPartition, target: Sequence[int]) -> bool:
    current = ctx.leadership.get(tp)
    return current is not None and all(r in current.isr for r in target)


def is_finished(ctx: ControllerContext, tp: TopicPartition, target: Sequence[int]) -> bool:
    """True once leader and ISR lie within the target, so the others can be stopped."""
    current = ctx.leadership.get(tp)
    return (
        current is not None
        and current.leader in target
        and current.leader in ctx.live_brokers
        and all(r in target for r in current.isr)
    )


def epoch_bump_state(ctx: ControllerContext, tp: TopicPartition) -> StateWrite | None:
    """Same leader and ISR at the next leader epoch: the replica list changed."""
    current = ctx.leadership.get(tp)
    if current is None or current.leader not in ctx.live_brokers:
        return None
    state = znodes.PartitionState(
        current.leader, current.state.leader_epoch + 1, list(current.isr), ctx.epoch
    )
    return StateWrite(tp, state, current.zk_version)


def finishing_state(
    ctx: ControllerContext, tp: TopicPartition, target: Sequence[int]
) -> StateWrite | None:
    """Leader and ISR within the target; None if already so, or if no target replica can
    lead yet (then the move waits)."""
    current = ctx.leadership.get(tp)
    if current is None or is_finished(ctx, tp, target):
        return None
    isr = [r for r in current.isr if r in target and r in ctx.live_brokers]
    if current.leader in target and current.leader in ctx.live_brokers:
        leader = current.leader
    else:
        result = reassign_leader(target, isr, ctx.live_ids)
        if result is None:
            return None
        leader = result.leader
    state = znodes.PartitionState(leader, current.state.leader_epoch + 1, isr, ctx.epoch)
    return StateWrite(tp, state, current.zk_version)
