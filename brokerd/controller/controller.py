"""The controller: one broker at a time decides leaders and ISRs for the whole cluster.

Every broker runs a Controller. It tries to win `/controller`; the winner reads the whole
cluster from ZooKeeper, then handles events one at a time from a single queue. ZooKeeper
watches and session changes only enqueue events (kazoo calls them on its own threads);
all decisions are made by the one task that drains the queue, which alone owns the
ControllerContext. ZooKeeper reads and writes run in worker threads (kazoo blocks).

A controller that finds its epoch overtaken (a fenced write fails) or loses its session
resigns: it drops its context and goes back to waiting for `/controller` to be free.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState

from brokerd.controller import zk_store
from brokerd.controller.channel import ControllerChannel, RequestBatch
from brokerd.controller.context import ControllerContext
from brokerd.controller.decisions import (
    StateWrite,
    controlled_shutdown_state,
    imbalanced_brokers,
    next_state,
    preferred_state,
    reelection_state,
)
from brokerd.controller.reassignment import (
    epoch_bump_state,
    finishing_state,
    is_caught_up,
    is_finished,
    replicas_while_moving,
)
from brokerd.controller.states import PartitionState, ReplicaState
from brokerd.controller.zk_store import ControllerMovedError
from brokerd.topic_configs import read_configs
from spark_replica.errors import NotControllerError, StaleBrokerEpochError, ZooKeeperError
from spark_replica.protocol.controller_requests import (
    ControllerHeader,
    StopReplicaRequest,
    StopReplicaTopic,
)
from spark_replica.reassignment import PartitionMove
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store, znodes

logger = logging.getLogger("brokerd.controller")

# A decision whose conditional write keeps conflicting is re-read and retried this often.
MAX_DECISION_ROUNDS = 5
# Config change notifications older than this are deleted (Kafka's 15 minutes).
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000
# After an unexpected failure (typically a lost session) wait this long before retrying.
FAILURE_BACKOFF_S = 0.5


class Event(enum.Enum):
    ELECTION = "controller znode changed"
    BROKER_CHANGE = "brokers changed"
    TOPIC_CHANGE = "topics changed"
    ISR_CHANGE = "ISR change notification"
    TOPIC_DELETION = "topic deletion requested"
    PREFERRED_ELECTION = "preferred replica election requested"
    AUTO_REBALANCE = "leader imbalance check"
    CONTROLLED_SHUTDOWN = "a broker asks to shut down"
    REASSIGNMENT = "partition reassignment requested"
    CONFIG_CHANGE = "topic config changed"
    SESSION_LOST = "ZooKeeper session lost"


@dataclass(frozen=True)
class ShutdownRequest:
    broker_id: int
    broker_epoch: int
    done: asyncio.Future[list[TopicPartition]]


@dataclass(frozen=True)
class RebalanceSettings:
    """Kafka's auto.leader.rebalance.enable and the imbalance check that drives it."""

    enabled: bool = True
    check_interval_s: float = 300.0
    imbalance_percent: int = 10


class Controller:
    def __init__(
        self, broker_id: int, zk: KazooClient, rebalance: RebalanceSettings | None = None
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.rebalance = rebalance or RebalanceSettings()
        self._rebalance_timer: asyncio.Task[None] | None = None
        self._shutdown_requests: list[ShutdownRequest] = []
        self.ctx: ControllerContext | None = None
        self.channel = ControllerChannel(f"controller-{broker_id}")
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generation = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def is_active(self) -> bool:
        return self.ctx is not None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.zk.add_listener(self._on_session_state)
        self._task = asyncio.create_task(self._run())
        self._enqueue(Event.ELECTION)
        if self.rebalance.enabled:
            self._rebalance_timer = asyncio.create_task(self._tick_rebalance())

    async def _tick_rebalance(self) -> None:
        while True:
            await asyncio.sleep(self.rebalance.check_interval_s)
            self._enqueue(Event.AUTO_REBALANCE)

    async def stop(self) -> None:
        self._generation += 1
        for task in (self._task, self._rebalance_timer):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.channel.close()

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off `broker_id` (a ControlledShutdown request to this broker);
        return the partitions it still leads. Raises NotControllerError if not active."""
        if self.ctx is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        request = ShutdownRequest(
            broker_id, broker_epoch, asyncio.get_running_loop().create_future()
        )
        self._shutdown_requests.append(request)
        self._enqueue(Event.CONTROLLED_SHUTDOWN)
        return await request.done

    def _enqueue(self, event: Event) -> None:
        """Safe from any thread: watches and listeners only ever call this."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._enqueue(Event.SESSION_LOST)
        elif state == KazooState.CONNECTED:
            self._enqueue(Event.ELECTION)

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._handle(event)
            except ControllerMovedError as exc:
                logger.warning("resigning as controller: %s", exc)
                await self._resign()
                self._enqueue(Event.ELECTION)
            except Exception as exc:
                # Usually a lost ZooKeeper session: give up controllership (if held), back
                # off, and try again; the session listener also wakes us on reconnection.
                logger.warning("controller event %s failed: %r", event.name, exc)
                if self.ctx is not None:
                    await self._resign()
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(self._release_controller_znode)
                await asyncio.sleep(FAILURE_BACKOFF_S)
                self._enqueue(Event.ELECTION)

    async def _handle(self, event: Event) -> None:
        if event is Event.SESSION_LOST:
            if self.ctx is not None:
                await self._resign()
            return
        if event is Event.ELECTION:
            if self.ctx is None:
                await self._try_to_lead()
            return
        if self.ctx is None:
            return
        handlers = {
            Event.BROKER_CHANGE: self._on_broker_change,
            Event.TOPIC_CHANGE: self._on_topic_change,
            Event.ISR_CHANGE: self._on_isr_change,
            Event.TOPIC_DELETION: self._on_topic_deletion,
            Event.PREFERRED_ELECTION: self._on_preferred_election,
            Event.AUTO_REBALANCE: self._on_auto_rebalance,
            Event.CONTROLLED_SHUTDOWN: self._on_controlled_shutdown,
            Event.REASSIGNMENT: self._on_reassignment,
            Event.CONFIG_CHANGE: self._on_config_change,
        }
        await handlers[event]()

    async def _resign(self) -> None:
        """Forget the cluster and drop requests not yet sent: they carry a stale epoch."""
        self._generation += 1
        self.ctx = None
        pending, self._shutdown_requests = self._shutdown_requests, []
        for request in pending:
            if not request.done.done():
                request.done.set_exception(NotControllerError("the controller moved"))
        await self.channel.close()

    def _release_controller_znode(self) -> None:
        """After an unexpected failure, give the controllership to another broker."""
        if zk_store.current_controller(self.zk) == self.broker_id:
            self.zk.delete(znodes.CONTROLLER_PATH)

    async def _try_to_lead(self) -> None:
        won = await asyncio.to_thread(zk_store.try_become_controller, self.zk, self.broker_id)
        if won is None:
            await asyncio.to_thread(self._watch_controller_znode)
            return
        epoch, epoch_zk_version = won
        logger.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        self.ctx = ControllerContext(self.broker_id, epoch, epoch_zk_version)
        self._generation += 1
        await self._on_elected()

    def _watch_controller_znode(self) -> None:
        """Wake up when `/controller` goes away (or at once, if it already has)."""
        generation = self._generation

        def on_change(event: object) -> None:
            if generation == self._generation:
                self._enqueue(Event.ELECTION)

        if self.zk.exists(znodes.CONTROLLER_PATH, watch=on_change) is None:
            self._enqueue(Event.ELECTION)

    def _watch(self, path: str, event: Event) -> None:
        generation = self._generation
        first = True

        def on_children(children: list[str]) -> bool:
            nonlocal first
            if generation != self._generation:
                return False
            if not first:
                self._enqueue(event)
            first = False
            return True

        self.zk.ensure_path(path)
        self.zk.ChildrenWatch(path, on_children)

    def _watch_topic(self, topic: str) -> None:
        """Wake on changes of a topic's assignment (partitions added); stop once it is gone."""
        generation = self._generation
        first = True

        def on_data(data: bytes | None, stat: object) -> bool:
            nonlocal first
            if generation != self._generation or data is None:
                return False
            if not first:
                self._enqueue(Event.TOPIC_CHANGE)
            first = False
            return True

        self.zk.DataWatch(znodes.topic_path(topic), on_data)

    def _watch_admin_request(self, path: str, event: Event) -> None:
        """Wake on every write of an admin znode (preferred election, reassignment)."""
        generation = self._generation

        def on_data(data: bytes | None, stat: object) -> bool:
            if generation != self._generation:
                return False
            if data is not None:
                self._enqueue(event)
            return True

        self.zk.DataWatch(path, on_data)

    async def _on_elected(self) -> None:
        """Failover (seed section D): read everything, finish what was left, tell everyone."""
        ctx = self._require_ctx()
        for path, event in (
            (znodes.BROKER_IDS_PATH, Event.BROKER_CHANGE),
            (znodes.TOPICS_PATH, Event.TOPIC_CHANGE),
            (znodes.ISR_CHANGE_NOTIFICATION_PATH, Event.ISR_CHANGE),
            (znodes.DELETE_TOPICS_PATH, Event.TOPIC_DELETION),
            (znodes.CONFIG_CHANGES_PATH, Event.CONFIG_CHANGE),
        ):
            await asyncio.to_thread(self._watch, path, event)
        for path, event in (
            (znodes.PREFERRED_REPLICA_ELECTION_PATH, Event.PREFERRED_ELECTION),
            (znodes.REASSIGN_PARTITIONS_PATH, Event.REASSIGNMENT),
        ):
            await asyncio.to_thread(self._watch_admin_request, path, event)
        self._enqueue(Event.TOPIC_DELETION)  # finish deletions a previous controller began
        self._enqueue(Event.REASSIGNMENT)  # and reassignments
        ctx.live_brokers = await asyncio.to_thread(zk_store.read_live_brokers, self.zk)
        # Configs read by _load_topics below cover the notifications present now.
        ctx.last_config_change = await asyncio.to_thread(zk_store.newest_config_change, self.zk)
        topics = await asyncio.to_thread(topic_store.list_topics, self.zk)
        await self._load_topics(topics)
        _, stepped_down = await asyncio.to_thread(zk_store.take_isr_change_notifications, self.zk)
        ctx.leadership.update(
            await asyncio.to_thread(zk_store.read_states, self.zk, list(ctx.leadership))
        )
        needing_leader = [
            tp
            for tp in ctx.assignments
            if tp not in ctx.leadership or ctx.leadership[tp].leader not in ctx.live_brokers
        ]
        await self._elect(needing_leader)
        await self._elect(sorted(stepped_down), reelection_state)
        batch = RequestBatch(ctx, is_init=True)
        batch.add_leader_and_isr(sorted(ctx.assignments))
        batch.add_update_metadata()
        self.channel.send(batch)

    async def _load_topics(self, topics: list[str]) -> list[TopicPartition]:
        """Read assignments, configs and existing states of `topics` into the context."""
        ctx = self._require_ctx()
        for topic in topics:
            await asyncio.to_thread(self._watch_topic, topic)
        assignments, configs = await asyncio.to_thread(zk_store.read_assignments, self.zk, topics)
        states = await asyncio.to_thread(zk_store.read_states, self.zk, list(assignments))
        ctx.assignments.update(assignments)
        ctx.topic_configs.update(configs)
        ctx.leadership.update(states)
        self._mark_replicas(sorted(assignments), ctx.live_ids, ReplicaState.ONLINE)
        dead = {r for replicas in assignments.values() for r in replicas} - ctx.live_ids
        self._mark_replicas(sorted(assignments), dead, ReplicaState.OFFLINE)
        for tp in assignments:
            known = tp in states and states[tp].leader in ctx.live_brokers
            initial = PartitionState.ONLINE if known else PartitionState.OFFLINE
            ctx.partition_states.transition([tp], PartitionState.NEW)
            if tp in states:
                ctx.partition_states.transition([tp], initial)
        return sorted(assignments)

    def _mark_replicas(
        self, partitions: list[TopicPartition], brokers: set[int] | None, target: ReplicaState
    ) -> None:
        refused = self._require_ctx().mark_replicas(partitions, brokers, target)
        if refused:
            logger.warning("refused replica transitions to %s: %s", target.name, refused)

    def _require_ctx(self) -> ControllerContext:
        if self.ctx is None:
            raise ControllerMovedError("this broker is not the controller")
        return self.ctx

    async def _elect(
        self,
        partitions: list[TopicPartition],
        decide: Callable[[ControllerContext, TopicPartition], StateWrite | None] = next_state,
    ) -> list[TopicPartition]:
        """Decide and write new states for `partitions`; return those whose state changed."""
        ctx = self._require_ctx()
        changed: list[TopicPartition] = []
        pending = [tp for tp in partitions if tp in ctx.assignments]
        for _ in range(MAX_DECISION_ROUNDS):
            writes = [w for w in (decide(ctx, tp) for tp in pending) if w is not None]
            offline = [
                tp
                for tp in pending
                if tp in ctx.leadership
                and ctx.leadership[tp].leader not in ctx.live_brokers
                and all(w.tp != tp for w in writes)
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
            for write in writes:
                if write.unclean and write.tp in outcome.written:
                    ctx.unclean_elections += 1
                    logger.warning(
                        "unclean leader election for %s: %d leads (%d so far)",
                        write.tp,
                        write.state.leader,
                        ctx.unclean_elections,
                    )
            if not outcome.conflicts:
                break
            ctx.leadership.update(
                await asyncio.to_thread(zk_store.read_states, self.zk, outcome.conflicts)
            )
            pending = outcome.conflicts
        return changed

    async def _on_broker_change(self) -> None:
        """Broker failure and start-up (seed sections A and E).

        A broker whose registration was replaced since the last look (it restarted
        faster than this event came round: a new czxid, its broker epoch) is both gone
        and born. It is handled as exactly that, a failure followed by a start-up
        (Kafka's KIP-380): the restarted process lost its in-memory state, so it must
        not stay leader or in the ISR as if nothing had happened.
        """
        ctx = self._require_ctx()
        started = time.monotonic()
        round_trips_before = ctx.zk_round_trips
        live_now = await asyncio.to_thread(zk_store.read_live_brokers, self.zk)
        gone = {b for b, live in ctx.live_brokers.items() if live_now.get(b, None) != live}
        born = {b for b, live in live_now.items() if ctx.live_brokers.get(b, None) != live}
        logger.info("brokers changed: gone %s, new %s", sorted(gone), sorted(born))
        self.channel.remove(gone)
        ctx.shutting_down -= gone | born
        ctx.live_brokers = {b: live for b, live in live_now.items() if b not in born}
        failed = ctx.partitions_with_replica_on(gone)
        self._mark_replicas(failed, gone, ReplicaState.OFFLINE)
        changed = await self._elect(failed)
        ctx.live_brokers = live_now
        starting = ctx.partitions_with_replica_on(born)
        self._mark_replicas(starting, born, ReplicaState.ONLINE)
        changed += await self._elect(starting)
        batch = RequestBatch(ctx)
        batch.add_leader_and_isr(changed)
        batch.add_leader_and_isr(starting, brokers=born)
        batch.add_update_metadata()
        self.channel.send(batch)
        if ctx.reassignments:
            await self._advance_reassignments()
        if gone:
            logger.info(
                "failover of brokers %s: %d partitions moved in %d ZooKeeper round trips, %.1f ms",
                sorted(gone),
                len(set(changed)),
                ctx.zk_round_trips - round_trips_before,
                (time.monotonic() - started) * 1000,
            )

    async def _on_topic_change(self) -> None:
        """New topics, topics gone, and partitions added to existing topics."""
        ctx = self._require_ctx()
        topics_now = set(await asyncio.to_thread(topic_store.list_topics, self.zk))
        for topic in ctx.topics - topics_now:
            ctx.remove_topic(topic)
        new_partitions = await self._load_topics(sorted(topics_now - ctx.topics))
        known, _ = await asyncio.to_thread(zk_store.read_assignments, self.zk, sorted(ctx.topics))
        grown = sorted(tp for tp in known if tp not in ctx.assignments)
        if grown:
            ctx.assignments.update({tp: known[tp] for tp in grown})
            ctx.partition_states.transition(grown, PartitionState.NEW)
            self._mark_replicas(grown, ctx.live_ids, ReplicaState.ONLINE)
            new_partitions += grown
        changed = await self._elect(new_partitions)
        batch = RequestBatch(ctx)
        batch.add_leader_and_isr(changed)
        batch.add_update_metadata()
        self.channel.send(batch)

    async def _on_isr_change(self) -> None:
        """Leaders changed ISRs: re-read them and tell every broker. A leader that stepped
        down gets a new election (see isr_writer.py), so it cannot stay leaderless."""
        ctx = self._require_ctx()
        changed, stepped_down = await asyncio.to_thread(
            zk_store.take_isr_change_notifications, self.zk
        )
        known = [tp for tp in changed if tp in ctx.assignments]
        ctx.leadership.update(await asyncio.to_thread(zk_store.read_states, self.zk, known))
        if stepped_down:
            logger.info("leaders of %s stepped down: electing again", sorted(stepped_down))
        repaired = await self._elect(sorted(stepped_down), reelection_state)
        batch = RequestBatch(ctx)
        batch.add_leader_and_isr(repaired)
        batch.add_update_metadata()
        self.channel.send(batch)
        if ctx.reassignments:
            await self._advance_reassignments()

    async def _on_topic_deletion(self) -> None:
        """Stop every replica of each topic queued for deletion, have it delete its log,
        then remove the topic's znodes.

        Replicas on brokers that are down are not waited for: once the znodes are gone,
        a broker deletes the logs of partitions no longer assigned to it when it starts.
        """
        ctx = self._require_ctx()
        for topic in await asyncio.to_thread(topic_store.topics_to_delete, self.zk):
            partitions = ctx.partitions_of_topic(topic)
            ctx.partition_states.transition(partitions, PartitionState.OFFLINE)
            ctx.partition_states.transition(partitions, PartitionState.NON_EXISTENT)
            self._mark_replicas(partitions, None, ReplicaState.OFFLINE)
            self._mark_replicas(partitions, None, ReplicaState.REPLICA_DELETION_STARTED)
            stopped = await self._stop_replicas(partitions)
            logger.info("deleting topic %s: replicas on %s deleted their logs", topic, stopped)
            await asyncio.to_thread(topic_store.remove_topic_znodes, self.zk, topic)
            ctx.remove_topic(topic)
        batch = RequestBatch(ctx)
        batch.add_update_metadata()
        self.channel.send(batch)

    async def _stop_replicas(self, partitions: list[TopicPartition]) -> list[int]:
        """StopReplica(delete) to every live replica; the brokers that confirmed."""
        ctx = self._require_ctx()
        on_broker: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            for replica in ctx.assignments[tp]:
                on_broker.setdefault(replica, []).append(tp)
        confirmed = await self._delete_replicas(on_broker)
        self._mark_replicas(partitions, set(confirmed), ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        return confirmed

    async def _delete_replicas(self, on_broker: dict[int, list[TopicPartition]]) -> list[int]:
        """StopReplica(delete) for the given replicas of each live broker; those that
        confirmed. Brokers that are down delete them when they start (no longer assigned)."""
        ctx = self._require_ctx()
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

    async def _on_preferred_election(self) -> None:
        """Move the requested partitions (all if none named) back to their preferred replica."""
        ctx = self._require_ctx()
        requested = await asyncio.to_thread(zk_store.read_preferred_election, self.zk)
        if requested is None:
            return
        partitions = [tp for tp in requested if tp in ctx.assignments] or sorted(ctx.assignments)
        await self._move_to_preferred(partitions)
        await asyncio.to_thread(zk_store.finish_preferred_election, self.zk)

    async def _on_auto_rebalance(self) -> None:
        ctx = self._require_ctx()
        imbalanced = imbalanced_brokers(ctx, self.rebalance.imbalance_percent)
        if imbalanced:
            logger.info("leader imbalance on brokers %s: rebalancing", sorted(imbalanced))
            await self._move_to_preferred(sorted(tp for tps in imbalanced.values() for tp in tps))

    async def _move_to_preferred(self, partitions: list[TopicPartition]) -> None:
        ctx = self._require_ctx()
        changed = await self._elect(partitions, preferred_state)
        if changed:
            logger.info("moved %d partitions back to their preferred leader", len(changed))
            batch = RequestBatch(ctx)
            batch.add_leader_and_isr(changed)
            batch.add_update_metadata()
            self.channel.send(batch)

    async def _on_controlled_shutdown(self) -> None:
        """Seed section H: move leadership off departing brokers before they go."""
        ctx = self._require_ctx()
        requests, self._shutdown_requests = self._shutdown_requests, []
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
            changed = await self._elect(involved, controlled_shutdown_state)
            batch = RequestBatch(ctx)
            batch.add_leader_and_isr(changed)
            batch.add_update_metadata()
            self.channel.send(batch)
            # Partitions with no other live replica cannot move; like Kafka, those do not
            # hold the broker back.
            remaining = [
                tp
                for tp in ctx.partitions_led_by({request.broker_id})
                if any(
                    r in ctx.live_brokers and r != request.broker_id for r in ctx.assignments[tp]
                )
            ]
            logger.info(
                "controlled shutdown of broker %d: %d partitions changed, %d still led, %.1f ms",
                request.broker_id,
                len(changed),
                len(remaining),
                (time.monotonic() - started) * 1000,
            )
            request.done.set_result(remaining)

    async def _on_reassignment(self) -> None:
        """Read the plan in `/admin/reassign_partitions` and move it on as far as it can go."""
        ctx = self._require_ctx()
        try:
            moves = await asyncio.to_thread(topic_store.read_reassignment, self.zk)
        except ZooKeeperError as exc:
            # Written by hand or by another tool: refuse it rather than fail every event.
            logger.error("dropping an unreadable reassignment: %s", exc)
            moves = []
            await asyncio.to_thread(zk_store.write_reassignment, self.zk, ctx.epoch_zk_version, [])
        ctx.reassignments = {m.tp: list(m.replicas) for m in moves}
        await self._advance_reassignments()

    async def _advance_reassignments(self) -> None:
        """Seed section F, one repeatable step at a time (see reassignment.py)."""
        ctx = self._require_ctx()
        gone = [tp for tp in ctx.reassignments if tp not in ctx.assignments]
        for tp in gone:
            logger.warning("reassignment of %s dropped: the partition does not exist", tp)
            del ctx.reassignments[tp]
        await self._start_moves()
        done = await self._finish_moves()
        if done or gone:
            for tp in done:
                del ctx.reassignments[tp]
            remaining = [PartitionMove(tp, tuple(r)) for tp, r in sorted(ctx.reassignments.items())]
            await asyncio.to_thread(
                zk_store.write_reassignment, self.zk, ctx.epoch_zk_version, remaining
            )

    async def _start_moves(self) -> None:
        """Add the target replicas to the assignment and start them as followers."""
        ctx = self._require_ctx()
        starting = {
            tp: replicas_while_moving(ctx.assignments[tp], target)
            for tp, target in ctx.reassignments.items()
            if ctx.assignments[tp] != target
            and ctx.assignments[tp] != replicas_while_moving(ctx.assignments[tp], target)
        }
        if not starting:
            return
        await asyncio.to_thread(zk_store.write_replicas, self.zk, ctx.epoch_zk_version, starting)
        ctx.assignments.update(starting)
        partitions = sorted(starting)
        self._mark_replicas(partitions, ctx.live_ids, ReplicaState.ONLINE)
        changed = await self._elect(partitions, epoch_bump_state)
        logger.info("reassignment started for %d partitions", len(partitions))
        batch = RequestBatch(ctx)
        batch.add_leader_and_isr(changed)
        batch.add_update_metadata()
        self.channel.send(batch)

    async def _finish_moves(self) -> list[TopicPartition]:
        """Complete the moves whose target replicas are all in sync; return them."""
        ctx = self._require_ctx()
        ready = sorted(
            tp
            for tp, target in ctx.reassignments.items()
            if ctx.assignments[tp] == target or is_caught_up(ctx, tp, target)
        )
        if not ready:
            return []
        changed = await self._elect(
            ready, lambda c, tp: finishing_state(c, tp, c.reassignments[tp])
        )
        done = [tp for tp in ready if is_finished(ctx, tp, ctx.reassignments[tp])]
        leaving: dict[int, list[TopicPartition]] = {}
        for tp in done:
            target = ctx.reassignments[tp]
            for replica in ctx.assignments[tp]:
                if replica not in target:
                    leaving.setdefault(replica, []).append(tp)
        for broker, partitions in leaving.items():
            self._mark_replicas(partitions, {broker}, ReplicaState.OFFLINE)
            self._mark_replicas(partitions, {broker}, ReplicaState.REPLICA_DELETION_STARTED)
        for tp in done:
            ctx.assignments[tp] = list(ctx.reassignments[tp])
        batch = RequestBatch(ctx)
        batch.add_leader_and_isr([tp for tp in changed if tp in done])
        batch.add_update_metadata()
        self.channel.send(batch)
        deleted = await self._delete_replicas(leaving)
        for broker, partitions in leaving.items():
            for tp in partitions:
                ctx.replica_states.remove((tp, broker))
        await asyncio.to_thread(
            zk_store.write_replicas,
            self.zk,
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

    async def _on_config_change(self) -> None:
        """Re-read changed topic configs; enabling unclean election elects offline leaders.

        The controller is also the one place that ages out old notifications (brokers
        have long applied them), so `/config/changes` does not grow forever.
        """
        ctx = self._require_ctx()
        topics, newest = await asyncio.to_thread(
            zk_store.read_config_changes, self.zk, ctx.last_config_change
        )
        ctx.last_config_change = newest
        wanted = ctx.topics if topics is None else topics & ctx.topics
        if wanted:
            was_unclean = {t for t in wanted if ctx.unclean_enabled(t)}
            ctx.topic_configs.update(await asyncio.to_thread(read_configs, self.zk, sorted(wanted)))
            now_unclean = sorted(t for t in wanted if ctx.unclean_enabled(t))
            offline = [
                tp
                for topic in now_unclean
                if topic not in was_unclean
                for tp in ctx.partitions_of_topic(topic)
                if tp in ctx.leadership and ctx.leadership[tp].leader not in ctx.live_brokers
            ]
            if offline:
                changed = await self._elect(offline)
                batch = RequestBatch(ctx)
                batch.add_leader_and_isr(changed)
                batch.add_update_metadata()
                self.channel.send(batch)
        purged = await asyncio.to_thread(
            zk_store.purge_config_changes, self.zk, CONFIG_CHANGE_EXPIRY_MS
        )
        if purged:
            logger.info("purged %d config change notifications", purged)
