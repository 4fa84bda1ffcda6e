"""Partition reassignment as controller events (the steps are decided in reassignment.py).

Runs on the controller's event task with the current controllership's ControllerOps.
The plan lives in `/admin/reassign_partitions`; every step is repeatable, so after a
failover the new controller resumes from what ZooKeeper shows.
"""

from __future__ import annotations

import asyncio
import logging

from brokerd.controller import zk_store
from brokerd.controller.operations import ControllerOps
from brokerd.controller.reassignment import (
    epoch_bump_state,
    finishing_state,
    is_caught_up,
    is_finished,
    replicas_while_moving,
)
from brokerd.controller.states import ReplicaState
from spark_replica.errors import ZooKeeperError
from spark_replica.reassignment import PartitionMove
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store

logger = logging.getLogger("brokerd.controller")


async def on_reassignment(ops: ControllerOps) -> None:
    """Read the plan in `/admin/reassign_partitions` and move it on as far as it can go."""
    ctx = ops.ctx
    try:
        moves = await asyncio.to_thread(topic_store.read_reassignment, ops.zk)
    except ZooKeeperError as exc:
        # Written by hand or by another tool: refuse it rather than fail every event.
        logger.error("dropping an unreadable reassignment: %s", exc)
        moves = []
        await asyncio.to_thread(zk_store.write_reassignment, ops.zk, ctx.epoch_zk_version, [])
    ctx.reassignments = {m.tp: list(m.replicas) for m in moves}
    await advance_reassignments(ops)


async def advance_reassignments(ops: ControllerOps) -> None:
    """Seed section F, one repeatable step at a time (see reassignment.py)."""
    ctx = ops.ctx
    gone = [tp for tp in ctx.reassignments if tp not in ctx.assignments]
    for tp in gone:
        logger.warning("reassignment of %s dropped: the partition does not exist", tp)
        del ctx.reassignments[tp]
    await _start_moves(ops)
    done = await _finish_moves(ops)
    if done or gone:
        for tp in done:
            del ctx.reassignments[tp]
        remaining = [PartitionMove(tp, tuple(r)) for tp, r in sorted(ctx.reassignments.items())]
        await asyncio.to_thread(
            zk_store.write_reassignment, ops.zk, ctx.epoch_zk_version, remaining
        )


async def _start_moves(ops: ControllerOps) -> None:
    """Add the target replicas to the assignment and start them as followers."""
    ctx = ops.ctx
    starting = {
        tp: replicas_while_moving(ctx.assignments[tp], target)
        for tp, target in ctx.reassignments.items()
        if ctx.assignments[tp] != target
        and ctx.assignments[tp] != replicas_while_moving(ctx.assignments[tp], target)
    }
    if not starting:
        return
    await asyncio.to_thread(zk_store.write_replicas, ops.zk, ctx.epoch_zk_version, starting)
    ctx.assignments.update(starting)
    partitions = sorted(starting)
    ops.mark_replicas(partitions, ctx.live_ids, ReplicaState.ONLINE)
    changed = await ops.elect(partitions, epoch_bump_state)
    logger.info("reassignment started for %d partitions", len(partitions))
    ops.announce(changed)


async def _finish_moves(ops: ControllerOps) -> list[TopicPartition]:
    """Complete the moves whose target replicas are all in sync; return them."""
    ctx = ops.ctx
    ready = sorted(
        tp
        for tp, target in ctx.reassignments.items()
        if ctx.assignments[tp] == target or is_caught_up(ctx, tp, target)
    )
    if not ready:
        return []
    changed = await ops.elect(ready, lambda c, tp: finishing_state(c, tp, c.reassignments[tp]))
    done = [tp for tp in ready if is_finished(ctx, tp, ctx.reassignments[tp])]
    leaving: dict[int, list[TopicPartition]] = {}
    for tp in done:
        target = ctx.reassignments[tp]
        for replica in ctx.assignments[tp]:
            if replica not in target:
                leaving.setdefault(replica, []).append(tp)
    for broker, partitions in leaving.items():
        ops.mark_replicas(partitions, {broker}, ReplicaState.OFFLINE)
        ops.mark_replicas(partitions, {broker}, ReplicaState.REPLICA_DELETION_STARTED)
    for tp in done:
        ctx.assignments[tp] = list(ctx.reassignments[tp])
    ops.announce([tp for tp in changed if tp in done])
    deleted = await ops.delete_replicas(leaving)
    for broker, partitions in leaving.items():
        for tp in partitions:
            ctx.replica_states.remove((tp, broker))
    await asyncio.to_thread(
        zk_store.write_replicas,
        ops.zk,
        ctx.epoch_zk_version,
        {tp: ctx.assignments[tp] for tp in done},
    )
    if done:
        logger.info(
            "reassignment finished for %d partitions; replicas deleted on brokers %s",
            len(done),
            deleted,
        )
    return done
