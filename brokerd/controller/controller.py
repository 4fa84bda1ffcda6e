"""The controller: one broker at a time decides leaders and ISRs for the whole cluster.

Every broker runs a Controller. It tries to win `/controller`; the winner reads the whole
cluster from ZooKeeper, then handles events one at a time from a single queue. ZooKeeper
watches and session changes only enqueue events (kazoo calls them on its own threads);
all decisions are made by the one task that drains the queue, which alone owns the
ControllerContext. ZooKeeper reads and writes run in worker threads (kazoo blocks).

This module is the event loop, the election and the watches. What each event does lives
beside it: broker_events.py (failures, start-ups, ISR changes, controlled shutdown),
topic_events.py, preferred_events.py and reassignment_events.py, all working through
the ControllerOps (operations.py) of the current controllership.

A controller that finds its epoch overtaken (a fenced write fails) or loses its session
resigns: it drops its context and goes back to waiting for `/controller` to be free.

Crashes are noticed without waiting for ZooKeeper sessions (liveness.py): the active
controller watches every other live broker and fails over one whose port refuses
connections at once (broker_events.on_brokers_died); every other broker watches the
controller, and when its port refuses, frees `/controller` (fenced by the controller
epoch) so that a successor is elected now. A paused broker still accepts connections and
is left to its session timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.client import KazooClient, KazooState

from brokerd.controller import zk_requests, zk_store
from brokerd.controller.broker_events import (
    ShutdownRequest,
    on_broker_change,
    on_brokers_died,
    on_controlled_shutdown,
    on_isr_change,
)
from brokerd.controller.channel import ControllerChannel, RequestBatch
from brokerd.controller.context import ControllerContext
from brokerd.controller.decisions import reelection_state
from brokerd.controller.liveness import BrokerLiveness, WatchedBroker
from brokerd.controller.operations import ControllerOps
from brokerd.controller.preferred_events import on_auto_rebalance, on_preferred_election
from brokerd.controller.reassignment_events import on_reassignment
from brokerd.controller.topic_events import (
    load_topics,
    on_config_change,
    on_topic_change,
    on_topic_deletion,
)
from brokerd.controller.watches import Watch, WatchSet
from brokerd.controller.zk_store import ControllerMovedError
from brokerd.metrics.registry import BrokerMetrics
from spark_replica.errors import NotControllerError
from spark_replica.topics import TopicPartition
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import translated

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

logger = logging.getLogger("brokerd.controller")

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
    BROKERS_DIED = "broker processes died"
    CONTROLLER_DIED = "the controller's process died"


@dataclass(frozen=True)
class RebalanceSettings:
    """Kafka's auto.leader.rebalance.enable and the imbalance check that drives it."""

    enabled: bool = True
    check_interval_s: float = 300.0
    imbalance_percent: int = 10


class Controller:
    def __init__(
        self,
        broker_id: int,
        zk: KazooClient,
        rebalance: RebalanceSettings | None = None,
        security: SecurityConfig | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        zk_requests.install(zk)
        self.metrics = BrokerMetrics() if metrics is None else metrics
        self.rebalance = rebalance or RebalanceSettings()
        self._rebalance_timer: asyncio.Task[None] | None = None
        self._shutdown_requests: list[ShutdownRequest] = []
        # Every ControlledShutdown request not answered yet, queued or in a handler's hands:
        # refused when this broker stops being the controller, so no asker waits out its
        # timeout for an answer nobody will give.
        self._unanswered: set[asyncio.Future[list[TopicPartition]]] = set()
        # Reports of dead processes, taken by the BROKERS_DIED / CONTROLLER_DIED events.
        self._dead_brokers: list[WatchedBroker] = []
        self._dead_controllers: list[WatchedBroker] = []
        # The controller seat watched while not the controller, and registrations (broker
        # id -> broker epoch) of controllers found dead: fenced if this broker wins next.
        self._watched_seat: zk_store.ControllerSeat | None = None
        self._dead_registrations: dict[int, int] = {}
        self._brokers_liveness = BrokerLiveness(self._on_broker_dead)
        self._controller_liveness = BrokerLiveness(self._on_controller_dead)
        self.ops: ControllerOps | None = None  # set while this broker is the controller
        self._watches: WatchSet | None = None  # the watches of that controllership
        self.channel = ControllerChannel(f"controller-{broker_id}", security)
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generation = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def is_active(self) -> bool:
        return self.ops is not None

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
        self.ops = None
        self._watches = None
        self._refuse_unanswered("the controller stopped")
        await self._brokers_liveness.close()
        await self._controller_liveness.close()
        await self.channel.close()

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off `broker_id` (a ControlledShutdown request to this broker);
        return the partitions it still leads. Raises NotControllerError if not active."""
        if self.ops is None:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        request = ShutdownRequest(
            broker_id, broker_epoch, asyncio.get_running_loop().create_future()
        )
        self._shutdown_requests.append(request)
        self._unanswered.add(request.done)
        self._enqueue(Event.CONTROLLED_SHUTDOWN)
        try:
            return await request.done
        finally:
            self._unanswered.discard(request.done)

    def _refuse_unanswered(self, reason: str) -> None:
        self._shutdown_requests = []
        for done in self._unanswered:
            if not done.done():
                done.set_exception(NotControllerError(reason))

    def _enqueue(self, event: Event) -> None:
        """Safe from any thread: watches and listeners only ever call this."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    def _on_broker_dead(self, broker: WatchedBroker) -> None:
        self._dead_brokers.append(broker)
        self._enqueue(Event.BROKERS_DIED)

    def _on_controller_dead(self, controller: WatchedBroker) -> None:
        self._dead_controllers.append(controller)
        self._enqueue(Event.CONTROLLER_DIED)

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._enqueue(Event.SESSION_LOST)
        elif state == KazooState.CONNECTED:
            watches = self._watches
            if watches is not None:
                watches.rearm()  # kazoo forgot them when the connection dropped
            self._enqueue(Event.ELECTION)
            # A change made while we were disconnected can go unseen: a broker may have
            # died and registered again (a new broker epoch, the same children's names)
            # meanwhile. Looking again is idempotent, and does nothing unless we are the
            # controller.
            for event in (Event.BROKER_CHANGE, Event.TOPIC_CHANGE, Event.ISR_CHANGE):
                self._enqueue(event)

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._handle_counted(event)
            except ControllerMovedError as exc:
                logger.warning("resigning as controller: %s", exc)
                await self._resign()
                self._enqueue(Event.ELECTION)
            except Exception as exc:
                # Usually a lost ZooKeeper session: give up controllership (if held), back
                # off, and try again; the session listener also wakes us on reconnection.
                logger.warning("controller event %s failed: %r", event.name, exc)
                if self.ops is not None:
                    await self._resign()
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(self._release_controller_znode)
                await asyncio.sleep(FAILURE_BACKOFF_S)
                self._enqueue(Event.ELECTION)
            self._watch_live_brokers()

    def _watch_live_brokers(self) -> None:
        """As the controller, watch every other broker held live; otherwise none."""
        ops = self.ops
        live = {} if ops is None else ops.ctx.live_brokers
        self._brokers_liveness.watch(
            WatchedBroker(broker_id, b.registration.host, b.registration.port, b.epoch)
            for broker_id, b in live.items()
            if broker_id != self.broker_id
        )

    async def _handle_counted(self, event: Event) -> None:
        """Handle `event`; log what it cost in ZooKeeper round trips when it used any
        (the figures of benchmarks/controller_scale.py)."""
        started = time.monotonic()
        with zk_requests.counting() as tally:
            await self._handle(event)
        if tally.requests:
            logger.info(
                "event %s: %d ZooKeeper requests in %d round trips, %.1f ms",
                event.name,
                tally.requests,
                tally.round_trips,
                (time.monotonic() - started) * 1000,
            )

    async def _handle(self, event: Event) -> None:
        if event is Event.SESSION_LOST:
            if self.ops is not None:
                await self._resign()
            return
        if event is Event.ELECTION:
            if self.ops is None:
                await self._try_to_lead()
            return
        if event is Event.CONTROLLER_DIED:
            await self._vacate_dead_controller_seats()
            return
        if self.ops is not None:
            await self._handler(event)(self.ops)

    def _handler(self, event: Event) -> Callable[[ControllerOps], Awaitable[None]]:
        if event is Event.CONTROLLED_SHUTDOWN:
            requests, self._shutdown_requests = self._shutdown_requests, []
            return lambda ops: on_controlled_shutdown(ops, requests)
        if event is Event.AUTO_REBALANCE:
            return lambda ops: on_auto_rebalance(ops, self.rebalance.imbalance_percent)
        if event is Event.BROKERS_DIED:
            dead, self._dead_brokers = self._dead_brokers, []
            return lambda ops: on_brokers_died(ops, [(b.broker_id, b.epoch) for b in dead])
        return EVENT_HANDLERS[event]

    async def _resign(self) -> None:
        """Forget the cluster and drop requests not yet sent: they carry a stale epoch."""
        self._generation += 1
        self.ops = None
        self._watches = None
        self._refuse_unanswered("the controller moved")
        await self.channel.close()

    def _release_controller_znode(self) -> None:
        """After an unexpected failure, give the controllership to another broker."""
        if zk_store.current_controller(self.zk) == self.broker_id:
            self.zk.delete(znodes.CONTROLLER_PATH)

    async def _vacate_dead_controller_seats(self) -> None:
        """Free `/controller` of a controller found dead, unless someone was elected since
        (the epoch's zkVersion fences it); the deletion then wakes every candidate."""
        dead, self._dead_controllers = self._dead_controllers, []
        for controller in dead:
            self._dead_registrations[controller.broker_id] = controller.epoch
            seat = self._watched_seat
            if seat is None or (seat.broker_id, seat.broker_epoch) != (
                controller.broker_id,
                controller.epoch,
            ):
                continue
            vacated = await asyncio.to_thread(
                zk_store.vacate_dead_controller_seat, self.zk, seat.epoch_zk_version
            )
            if vacated:
                logger.info(
                    "controller %d died (its port refuses connections): electing a successor",
                    controller.broker_id,
                )

    async def _try_to_lead(self) -> None:
        won = await asyncio.to_thread(zk_store.try_become_controller, self.zk, self.broker_id)
        if won is None:
            seat = await asyncio.to_thread(self._watch_controller_znode)
            if seat is not None and seat.broker_id == self.broker_id:
                seat = None
            self._watched_seat = seat
            self._controller_liveness.watch(
                []
                if seat is None
                else [
                    WatchedBroker(
                        seat.broker_id,
                        seat.registration.host,
                        seat.registration.port,
                        seat.broker_epoch,
                    )
                ]
            )
            return
        self._watched_seat = None
        self._controller_liveness.watch([])
        epoch, epoch_zk_version = won
        logger.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        ctx = ControllerContext(self.broker_id, epoch, epoch_zk_version)
        self._generation += 1
        watches = self._watches = WatchSet(self.zk)
        self.ops = ControllerOps(
            self.zk, ctx, self.channel, functools.partial(self._watch_topics, watches), self.metrics
        )
        await self._on_elected(self.ops, watches)

    def _watch_controller_znode(self) -> zk_store.ControllerSeat | None:
        """Wake up when `/controller` goes away (or at once, if it already has); return
        who holds it now, if that can be told."""
        generation = self._generation

        def on_change(event: object) -> None:
            if generation == self._generation:
                self._enqueue(Event.ELECTION)

        with translated():
            watched = self.zk.exists_async(znodes.CONTROLLER_PATH, watch=on_change)
        seat = zk_store.read_controller_seat(self.zk)  # sent with the watch: one round trip
        with translated():
            if watched.get() is None:
                self._enqueue(Event.ELECTION)
                return None
        return seat

    def _watch(
        self, path: str, event: Event, children: bool = True, ends_with_znode: bool = False
    ) -> Watch:
        """A watch that enqueues `event` while this controllership lasts."""
        generation = self._generation
        return Watch(
            path,
            children,
            notify=lambda: self._enqueue(event),
            wanted=lambda: generation == self._generation,
            ends_with_znode=ends_with_znode,
        )

    def _watch_topics(self, watches: WatchSet, topics: list[str]) -> None:
        """Wake on changes of the topics' assignments (partitions added), each until the
        topic is gone (blocking)."""
        watches.add(
            [
                self._watch(znodes.topic_path(topic), Event.TOPIC_CHANGE, False, True)
                for topic in topics
            ],
        )

    async def _on_elected(self, ops: ControllerOps, watches: WatchSet) -> None:
        """Failover (seed section D): read everything, finish what was left, tell everyone."""
        ctx = ops.ctx
        cluster_watches = [
            self._watch(znodes.BROKER_IDS_PATH, Event.BROKER_CHANGE),
            self._watch(znodes.TOPICS_PATH, Event.TOPIC_CHANGE),
            self._watch(znodes.ISR_CHANGE_NOTIFICATION_PATH, Event.ISR_CHANGE),
            self._watch(znodes.DELETE_TOPICS_PATH, Event.TOPIC_DELETION),
            self._watch(znodes.CONFIG_CHANGES_PATH, Event.CONFIG_CHANGE),
            # Admin requests: every write of their znode.
            self._watch(znodes.PREFERRED_REPLICA_ELECTION_PATH, Event.PREFERRED_ELECTION, False),
            self._watch(znodes.REASSIGN_PARTITIONS_PATH, Event.REASSIGNMENT, False),
        ]
        await asyncio.to_thread(watches.add, cluster_watches)
        cluster = await asyncio.to_thread(zk_store.read_cluster_at_takeover, self.zk)
        ctx.live_brokers = cluster.live_brokers
        ctx.last_config_change = cluster.newest_config_change
        for waiting, event in (
            (cluster.admin.topic_deletions, Event.TOPIC_DELETION),
            (cluster.admin.reassignment, Event.REASSIGNMENT),
            (cluster.admin.preferred_election, Event.PREFERRED_ELECTION),
        ):
            if waiting:
                self._enqueue(event)
        # A predecessor found dead is not live, though its registration may remain.
        for broker_id, broker_epoch in self._dead_registrations.items():
            ctx.fence(broker_id, broker_epoch)
        self._dead_registrations.clear()
        ctx.live_brokers = ctx.unfenced(ctx.live_brokers)
        if ctx.fenced:
            logger.info("brokers %s died before their sessions expired", sorted(ctx.fenced))
        await load_topics(ops, cluster.topics)
        # Every partition is decided afresh: new ones get leaders, those led by a dead or
        # restarted broker (it may even be this one) are failed over, and dead or
        # restarted followers leave the ISR, as when the previous controller saw them go
        # (a predecessor found dead followed partitions other brokers lead).
        await ops.elect(sorted(ctx.assignments))
        await ops.elect(sorted(cluster.stepped_down), reelection_state)
        batch = RequestBatch(ctx, is_init=True)
        batch.add_leader_and_isr(sorted(ctx.assignments))
        batch.add_update_metadata()
        self.channel.send(batch)


EVENT_HANDLERS: dict[Event, Callable[[ControllerOps], Awaitable[None]]] = {
    Event.BROKER_CHANGE: on_broker_change,
    Event.TOPIC_CHANGE: on_topic_change,
    Event.ISR_CHANGE: on_isr_change,
    Event.TOPIC_DELETION: on_topic_deletion,
    Event.PREFERRED_ELECTION: on_preferred_election,
    Event.REASSIGNMENT: on_reassignment,
    Event.CONFIG_CHANGE: on_config_change,
}
