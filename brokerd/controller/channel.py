"""Requests from the controller to brokers, collected per event and sent once per broker.

An event's handler adds partitions to a RequestBatch as it decides them; the batch then
becomes at most one LeaderAndIsr and one UpdateMetadata request per broker, sent to all
brokers concurrently. A broker that cannot be reached is retried until a deadline; if it
died, the broker-change event that follows deals with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from brokerd.controller.context import ControllerContext
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import ReplogError
from spark_replica.protocol.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    PartitionLeaderState,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.protocol.metadata import BrokerInfo
from spark_replica.topics import TopicPartition

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
    grouped: dict[str, list[PartitionLeaderState]] = defaultdict(list)
    for tp, state in sorted(states, key=lambda item: item[0]):
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
            BrokerInfo(b.registration.broker_id, b.registration.host, b.registration.port)
            for broker_id, b in sorted(self.ctx.live_brokers.items())
            if ids is None or broker_id in ids
        ]

    def requests(self) -> dict[int, list[object]]:
        """The requests per broker, LeaderAndIsr before UpdateMetadata."""
        per_broker: dict[int, list[object]] = defaultdict(list)
        for broker_id, partitions in self.leader_and_isr.items():
            if broker_id not in self.ctx.live_brokers:
                continue
            states = [(tp, leader_state(self.ctx, tp)) for tp in partitions]
            leaders = {state.leader for _, state in states}
            per_broker[broker_id].append(
                LeaderAndIsrRequest(
                    self._header(broker_id),
                    self.is_init,
                    group_by_topic(states),
                    self._brokers(leaders),
                )
            )
        if self.update_metadata:
            everything = [(tp, leader_state(self.ctx, tp)) for tp in self.ctx.leadership]
            topics = group_by_topic(everything)
            brokers = self._brokers()
            for broker_id in self.ctx.live_brokers:
                per_broker[broker_id].append(
                    UpdateMetadataRequest(self._header(broker_id), brokers, topics)
                )
        return per_broker


class ControllerChannel:
    """Connections from the controller to every broker it talks to."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._connections: dict[int, BrokerConnection] = {}

    async def send(self, batch: RequestBatch) -> None:
        per_broker = batch.requests()
        addresses = {
            broker_id: (b.registration.host, b.registration.port)
            for broker_id, b in batch.ctx.live_brokers.items()
        }
        await asyncio.gather(
            *(
                self._send_all(broker_id, addresses[broker_id], requests)
                for broker_id, requests in per_broker.items()
            )
        )

    async def _send_all(
        self, broker_id: int, address: tuple[str, int], requests: list[object]
    ) -> None:
        for request in requests:
            await self._send_one(broker_id, address, request)

    async def _send_one(self, broker_id: int, address: tuple[str, int], request: object) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SEND_DEADLINE_S
        while True:
            try:
                conn = await self._connection(broker_id, address)
                await conn.send(request, timeout_s=SEND_DEADLINE_S)
                return
            except ReplogError as exc:
                if not exc.retriable or loop.time() > deadline:
                    logger.warning(
                        "%s to broker %d failed: %s", type(request).__name__, broker_id, exc
                    )
                    return
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _connection(self, broker_id: int, address: tuple[str, int]) -> BrokerConnection:
        conn = self._connections.get(broker_id)
        if conn is not None and conn.is_usable and (conn.host, conn.port) == address:
            return conn
        if conn is not None:
            await conn.close()
        conn = BrokerConnection(*address, client_id=self.client_id)
        await conn.connect()
        self._connections[broker_id] = conn
        return conn

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            await conn.close()
