"""Requests from the controller to brokers, collected per event and sent once per broker.

An event's handler adds partitions to a RequestBatch as it decides them; the batch then
becomes at most one LeaderAndIsr and one UpdateMetadata request per broker, handed to
that broker's sender. A broker that cannot be reached is retried until a deadline; if it
died, the broker-change event that follows deals with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from brokerd.controller.context import ControllerContext
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import ReplogError
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    PartitionLeaderState,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

logger = logging.getLogger("brokerd.controller.channel")

SEND_DEADLINE_S = 15.0
RETRY_BACKOFF_S = 0.2


def leader_state(ctx: ControllerContext, tp: TopicPartition) -> PartitionLeaderState:
    li = ctx.leadership[tp]
    return PartitionLeaderState(
        tp.partition,
        li.leader,
        li.state.leader_epoch,
        list(li.isr),
        li.zk_version,
        list(ctx.assignments[tp]),
    )


def group_by_topic(
    states: list[tuple[TopicPartition, PartitionLeaderState]],
) -> list[TopicLeaderStates]:
    """The states by topic, in the order given (callers give them sorted)."""
    grouped: dict[str, list[PartitionLeaderState]] = defaultdict(list)
    for tp, state in states:
        grouped[tp.topic].append(state)
    return [TopicLeaderStates(topic, partitions) for topic, partitions in grouped.items()]


class RequestBatch:
    """What one event decided, to send to each broker once."""

    def __init__(self, ctx: ControllerContext, is_init: bool = False) -> None:
        self.ctx = ctx
        self.is_init = is_init
        self.leader_and_isr: dict[int, set[TopicPartition]] = defaultdict(set)
        self.update_metadata = False

    def add_leader_and_isr(
        self, partitions: list[TopicPartition], brokers: set[int] | None = None
    ) -> None:
        """Tell the live replicas of each partition (or only `brokers`) its current state."""
        for tp in partitions:
            if tp not in self.ctx.leadership:
                continue
            for replica in self.ctx.assignments[tp]:
                if replica in self.ctx.live_brokers and (brokers is None or replica in brokers):
                    self.leader_and_isr[replica].add(tp)

    def add_update_metadata(self) -> None:
        self.update_metadata = True

    def _header(self, broker_id: int) -> ControllerHeader:
        live = self.ctx.live_brokers[broker_id]
        return ControllerHeader(self.ctx.broker_id, self.ctx.epoch, live.epoch)

    def _brokers(self, ids: set[int] | None = None) -> list[BrokerInfo]:
        return [
            BrokerInfo(
                b.registration.broker_id,
                b.registration.host,
                b.registration.port,
                b.registration.kafka_port,
                b.registration.kafka_host,
            )
            for broker_id, b in sorted(self.ctx.live_brokers.items())
            if ids is None or broker_id in ids
        ]

    def requests(self) -> dict[int, list[object]]:
        """The requests per broker, LeaderAndIsr before UpdateMetadata.

        Each partition's state is built once and each request's topics grouped once,
        however many brokers it goes to: a failover at 10,000 partitions sends every one
        of them to every broker.
        """
        per_broker: dict[int, list[object]] = defaultdict(list)
        wanted: Iterable[TopicPartition] = (
            self.ctx.leadership
            if self.update_metadata
            else set[TopicPartition]().union(*self.leader_and_isr.values())
        )
        states = {tp: leader_state(self.ctx, tp) for tp in sorted(wanted)}
        for broker_id, partitions in self.leader_and_isr.items():
            if broker_id not in self.ctx.live_brokers:
                continue
            mine = [(tp, state) for tp, state in states.items() if tp in partitions]
            leaders = {state.leader for _, state in mine}
            per_broker[broker_id].append(
                LeaderAndIsrRequest(
                    self._header(broker_id),
                    self.is_init,
                    group_by_topic(mine),
                    self._brokers(leaders),
                )
            )
        if self.update_metadata:
            topics = group_by_topic(list(states.items()))
            brokers = self._brokers()
            for broker_id in self.ctx.live_brokers:
                per_broker[broker_id].append(
                    UpdateMetadataRequest(self._header(broker_id), brokers, topics)
                )
        return per_broker


class ControllerChannel:
    """One queue and one sender task per broker, as Kafka's controller channel manager.

    `send` only enqueues, so the controller's event queue never waits on a slow or
    paused broker; each broker still receives its requests in the order decided.
    """

    def __init__(self, client_id: str, security: SecurityConfig | None = None) -> None:
        self.client_id = client_id
        self.security = security
        self._senders: dict[int, _BrokerSender] = {}

    def call(self, ctx: ControllerContext, broker_id: int, request: object) -> asyncio.Future[bool]:
        """Queue one request; the future says whether the broker accepted it in time.

        The deadline runs from now, not from when the sender reaches the request: the
        state updates queued ahead of it are retried until the broker's sender is removed,
        which only the controller's event task does, and that task may be the one waiting
        for this answer (a topic deleted right after a failover, while the dead broker
        is still registered, waited for ever). A request whose caller gave up is not sent.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        expiry = loop.call_later(SEND_DEADLINE_S, _give_up, done)
        done.add_done_callback(lambda _: expiry.cancel())
        self._sender(ctx, broker_id).enqueue([request], done)
        return done

    def _sender(self, ctx: ControllerContext, broker_id: int) -> _BrokerSender:
        registration = ctx.live_brokers[broker_id].registration
        address = (registration.host, registration.port)
        sender = self._senders.get(broker_id)
        if sender is None or sender.address != address:
            if sender is not None:
                sender.stop()
            sender = _BrokerSender(broker_id, address, self.client_id, self.security)
            self._senders[broker_id] = sender
        return sender

    def send(self, batch: RequestBatch) -> None:
        for broker_id, requests in batch.requests().items():
            self._sender(batch.ctx, broker_id).enqueue(requests)

    def remove(self, broker_ids: set[int]) -> None:
        """Stop the senders of brokers that are gone; their queued requests are dropped."""
        for broker_id in broker_ids:
            sender = self._senders.pop(broker_id, None)
            if sender is not None:
                sender.stop()

    async def close(self) -> None:
        senders, self._senders = self._senders, {}
        for sender in senders.values():
            await sender.close()


def _give_up(done: asyncio.Future[bool]) -> None:
    if not done.done():
        done.set_result(False)


class _BrokerSender:
    def __init__(
        self,
        broker_id: int,
        address: tuple[str, int],
        client_id: str,
        security: SecurityConfig | None,
    ) -> None:
        self.broker_id = broker_id
        self.security = security
        self.address = address
        self.client_id = client_id
        self._queue: asyncio.Queue[tuple[object, asyncio.Future[bool] | None] | None] = (
            asyncio.Queue()
        )
        self._conn: BrokerConnection | None = None
        self._task = asyncio.create_task(self._run())

    def enqueue(self, requests: list[object], done: asyncio.Future[bool] | None = None) -> None:
        for request in requests:
            self._queue.put_nowait((request, done))

    def stop(self) -> None:
        # A sentinel as well as a cancel: Python 3.11's wait_for can swallow a cancellation
        # that races with an answer, and the sender must still come to an end.
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None and item[1] is not None and not item[1].done():
                item[1].set_result(False)
        self._queue.put_nowait(None)
        self._task.cancel()

    async def close(self) -> None:
        self.stop()
        await asyncio.wait({self._task}, timeout=SEND_DEADLINE_S)
        if self._conn is not None:
            await self._conn.close()

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            request, done = item
            if done is not None and done.done():
                continue
            accepted = False
            try:
                accepted = await self._send_one(request, done)
            finally:
                if done is not None and not done.done():
                    done.set_result(accepted)

    async def _send_one(self, request: object, done: asyncio.Future[bool] | None) -> bool:
        """Send until accepted. A call someone awaits gives up when its deadline fires
        (`done` is then resolved); a state update is retried for as long as the broker is
        registered (a paused or slow broker must still get it), which ends when the
        controller removes this sender."""
        while True:
            try:
                conn = await self._connection()
                await conn.send(request, timeout_s=SEND_DEADLINE_S)
                return True
            except ReplogError as exc:
                if not exc.retriable or (done is not None and done.done()):
                    logger.warning(
                        "%s to broker %d failed: %s", type(request).__name__, self.broker_id, exc
                    )
                    return False
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or not self._conn.is_usable:
            self._conn = BrokerConnection(
                *self.address, client_id=self.client_id, security=self.security
            )
            await self._conn.connect()
        return self._conn
