"""Events that come from brokers: failures and start-ups, ISR changes, controlled shutdown.

A failure is learnt two ways, handled alike (apply_live_brokers): a registration that
went from ZooKeeper (its session expired or was closed), or a process the controller
found dead while its registration remains (liveness.py; on_brokers_died). In the second
case the registration is fenced until ZooKeeper removes it: it cannot come back as live.

Each handler runs on the controller's event task with the ControllerOps of the current
controllership (see controller.py and operations.py).

A leader that finds its leaderAndISR znode written by someone else stops leading and
posts an ISR change notification marked `leader_stepped_down` (isr_writer.py). The
controller answers with a new election at a bumped epoch (decisions.reelection_state)
and tells every replica: the leader named in ZooKeeper then leads again, or another
replica does if it died. An extra epoch bump when the LeaderAndIsr the broker was
waiting for was already on its way is harmless; a partition left without an acting
leader is not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from brokerd.controller import zk_store
from brokerd.controller.channel import RequestBatch
from brokerd.controller.context import LiveBroker
from brokerd.controller.decisions import controlled_shutdown_state, reelection_state
from brokerd.controller.operations import ControllerOps
from brokerd.controller.reassignment_events import advance_reassignments
from brokerd.controller.states import ReplicaState
from spark_replica.errors import StaleBrokerEpochError
from spark_replica.topics import TopicPartition

logger = logging.getLogger("brokerd.controller")


@dataclass(frozen=True)
class ShutdownRequest:
    broker_id: int
    broker_epoch: int
    done: asyncio.Future[list[TopicPartition]]


async def on_broker_change(ops: ControllerOps) -> None:
    """Broker failure and start-up (seed sections A and E), as ZooKeeper's registrations
    tell them; a registration fenced by on_brokers_died stays dead until it goes."""
    registered = await asyncio.to_thread(zk_store.read_live_brokers, ops.zk)
    await apply_live_brokers(ops, ops.ctx.unfenced(registered))


async def on_brokers_died(ops: ControllerOps, dead: list[tuple[int, int]]) -> None:
    """Brokers (id, broker epoch) whose processes were found dead (liveness.py) fail
    over now, as if their sessions had expired, instead of a session timeout later.

    Their registrations are fenced: until ZooKeeper removes them they are not live
    again, so a report of a broker that has since registered anew (another epoch) is
    ignored, and nothing can bring the dead incarnation back.
    """
    ctx = ops.ctx
    fenced = {broker_id for broker_id, epoch in dead if ctx.fence(broker_id, epoch)}
    if not fenced:
        return
    logger.info("brokers %s died (their ports refuse connections)", sorted(fenced))
    await apply_live_brokers(
        ops, {b: live for b, live in ctx.live_brokers.items() if b not in fenced}
    )


async def apply_live_brokers(ops: ControllerOps, live_now: dict[int, LiveBroker]) -> None:
    """Fail over the brokers missing from `live_now` and start the new ones.

    A broker whose registration was replaced since the last look (it restarted faster
    than this event came round: a new czxid, its broker epoch) is both gone and born. It
    is handled as exactly that, a failure followed by a start-up (Kafka's KIP-380): the
    restarted process lost its in-memory state, so it must not stay leader or in the ISR
    as if nothing had happened.
    """
    ctx = ops.ctx
    started = time.monotonic()
    round_trips_before = ctx.zk_round_trips
    gone = {b for b, live in ctx.live_brokers.items() if live_now.get(b) != live}
    born = {b for b, live in live_now.items() if ctx.live_brokers.get(b, None) != live}
    logger.info("brokers changed: gone %s, new %s", sorted(gone), sorted(born))
    ops.channel.remove(gone)
    ctx.shutting_down -= gone | born
    ctx.live_brokers = {b: live for b, live in live_now.items() if b not in born}
    failed = ctx.partitions_with_replica_on(gone)
    ops.mark_replicas(failed, gone, ReplicaState.OFFLINE)
    changed = await ops.elect(failed)
    ctx.live_brokers = live_now
    starting = ctx.partitions_with_replica_on(born)
    ops.mark_replicas(starting, born, ReplicaState.ONLINE)
    changed += await ops.elect(starting)
    batch = RequestBatch(ctx)
    batch.add_leader_and_isr(changed)
    batch.add_leader_and_isr(starting, brokers=born)
    batch.add_update_metadata()
    ops.channel.send(batch)
    if ctx.reassignments:
        await advance_reassignments(ops)
    if gone:
        logger.info(
            "failover of brokers %s: %d partitions moved in %d ZooKeeper round trips, %.1f ms",
            sorted(gone),
            len(set(changed)),
            ctx.zk_round_trips - round_trips_before,
            (time.monotonic() - started) * 1000,
        )


async def on_isr_change(ops: ControllerOps) -> None:
    """Leaders changed ISRs: re-read them and tell every broker; elect again where a
    leader stepped down."""
    ctx = ops.ctx
    changed, stepped_down = await asyncio.to_thread(zk_store.take_isr_change_notifications, ops.zk)
    known = [tp for tp in changed if tp in ctx.assignments]
    ctx.leadership.update(await asyncio.to_thread(zk_store.read_states, ops.zk, known))
    if stepped_down:
        logger.info("leaders of %s stepped down: electing again", sorted(stepped_down))
    ops.announce(await ops.elect(sorted(stepped_down), reelection_state))
    if ctx.reassignments:
        await advance_reassignments(ops)


async def on_controlled_shutdown(ops: ControllerOps, requests: list[ShutdownRequest]) -> None:
    """Seed section H: move leadership off departing brokers before they go."""
    ctx = ops.ctx
    for request in requests:
        live = ctx.live_brokers.get(request.broker_id)
        if live is None or live.epoch != request.broker_epoch:
            request.done.set_exception(
                StaleBrokerEpochError(f"broker {request.broker_id} is not registered as asked")
            )
            continue
        started = time.monotonic()
        ctx.shutting_down.add(request.broker_id)
        involved = ctx.partitions_with_replica_on({request.broker_id})
        changed = await ops.elect(involved, controlled_shutdown_state)
        ops.announce(changed)
        # Partitions with no other live replica cannot move; like Kafka, those do not
        # hold the broker back.
        remaining = [
            tp
            for tp in ctx.partitions_led_by({request.broker_id})
            if any(r in ctx.live_brokers and r != request.broker_id for r in ctx.assignments[tp])
        ]
        logger.info(
            "controlled shutdown of broker %d: %d partitions changed, %d still led, %.1f ms",
            request.broker_id,
            len(changed),
            len(remaining),
            (time.monotonic() - started) * 1000,
        )
        request.done.set_result(remaining)
