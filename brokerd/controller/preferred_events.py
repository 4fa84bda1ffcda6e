"""Leadership back to preferred replicas: on request, and when the imbalance check finds
brokers leading less than they should (Kafka's auto.leader.rebalance.enable).

Runs on the controller's event task with the current controllership's ControllerOps.
"""

from __future__ import annotations

import asyncio
import logging

from brokerd.controller import zk_store
from brokerd.controller.decisions import imbalanced_brokers, preferred_state
from brokerd.controller.operations import ControllerOps
from spark_replica.topics import TopicPartition

logger = logging.getLogger("brokerd.controller")


async def on_preferred_election(ops: ControllerOps) -> None:
    """Move the requested partitions (all if none named) back to their preferred replica."""
    ctx = ops.ctx
    requested = await asyncio.to_thread(zk_store.read_preferred_election, ops.zk)
    if requested is None:
        return
    partitions = [tp for tp in requested if tp in ctx.assignments] or sorted(ctx.assignments)
    await _move_to_preferred(ops, partitions)
    await asyncio.to_thread(zk_store.finish_preferred_election, ops.zk)


async def on_auto_rebalance(ops: ControllerOps, imbalance_percent: int) -> None:
    imbalanced = imbalanced_brokers(ops.ctx, imbalance_percent)
    if imbalanced:
        logger.info("leader imbalance on brokers %s: rebalancing", sorted(imbalanced))
        await _move_to_preferred(ops, sorted(tp for tps in imbalanced.values() for tp in tps))


async def _move_to_preferred(ops: ControllerOps, partitions: list[TopicPartition]) -> None:
    changed = await ops.elect(partitions, preferred_state)
    if changed:
        logger.info("moved %d partitions back to their preferred leader", len(changed))
        ops.announce(changed)
