"""The transaction coordinator's side of WriteTxnMarkers: markers for partitions another
broker leads, sent to that broker's replog listener.

One pipelined connection per leader broker (spark_replica.client.connection), opened on
first use with the inter-broker security settings and opened again once it breaks or the
broker's address changes; the coordinator sends a leader's markers together, and many
transactions' markers share the connection. The answer is each partition's error as the
leader gave it (None where its marker is committed). What keeps a marker from being
answered at all is that marker's error, never raised: the leader is unknown
(BROKER_NOT_AVAILABLE) or the connection failed (ConnectionLostError); both are
retriable, and the coordinator tries again after refreshing whom it asks
(brokerd/transactions/markers.py).

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from brokerd.core.context import BrokerContext
from brokerd.core.txn_markers import MARKERS_TIMEOUT_MS, MarkerEntry, MarkerErrors
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import BrokerNotAvailableError, ReplogError, error_for_code
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.write_txn_markers import (
    MarkerTopic,
    TxnMarkerRequestEntry,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

logger = logging.getLogger("brokerd.transactions")

# The leader answers within the markers' timeout; allow the round trip on top.
ANSWER_MARGIN_S = 5.0


def markers_request(entries: Sequence[MarkerEntry], timeout_ms: int) -> WriteTxnMarkersRequest:
    """The inter-broker request for `entries`, each entry's partitions grouped by topic."""
    markers = []
    for entry in entries:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in entry.partitions:
            by_topic[tp.topic].append(tp.partition)
        markers.append(
            TxnMarkerRequestEntry(
                entry.producer_id,
                entry.producer_epoch,
                entry.committed,
                entry.coordinator_epoch,
                [MarkerTopic(topic, partitions) for topic, partitions in by_topic.items()],
            )
        )
    return WriteTxnMarkersRequest(markers, timeout_ms)


def answered_errors(
    entries: Sequence[MarkerEntry], response: WriteTxnMarkersResponse
) -> MarkerErrors:
    """Each entry's partitions' errors as the leader answered them. A partition the
    answer leaves out gets BROKER_NOT_AVAILABLE (retriable): nothing says its marker was
    written."""
    errors: MarkerErrors = []
    for index, entry in enumerate(entries):
        answered: dict[TopicPartition, ReplogError | None] = {}
        if index < len(response.markers):
            for topic in response.markers[index].topics:
                for result in topic.partitions:
                    answered[TopicPartition(topic.topic, result.partition)] = (
                        error_for_code(result.error_code, result.error_message or "")
                        if result.error_code
                        else None
                    )
        errors.append(
            {
                tp: answered[tp]
                if tp in answered
                else BrokerNotAvailableError(f"the leader's answer leaves out {tp}")
                for tp in entry.partitions
            }
        )
    return errors


def failed_everywhere(entries: Sequence[MarkerEntry], error: ReplogError) -> MarkerErrors:
    return [dict.fromkeys(entry.partitions, error) for entry in entries]


# Where a broker is now, by id: its replog listener's address, None if unknown.
AddressOf = Callable[[int], tuple[str, int] | None]


class TxnMarkerSender:
    """Sends markers to the leaders on other brokers, one connection per broker."""

    def __init__(
        self, client_id: str, security: SecurityConfig | None, address_of: AddressOf
    ) -> None:
        self.client_id = client_id
        self.security = security
        self._address_of = address_of
        self._connections: dict[int, BrokerConnection] = {}
        # One connection attempt per broker at a time: concurrent sends wait for it.
        self._connecting: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    @classmethod
    def of_broker(cls, ctx: BrokerContext) -> TxnMarkerSender:
        """The broker's sender: the brokers' addresses from its metadata cache, its
        inter-broker security settings."""

        def address_of(broker_id: int) -> tuple[str, int] | None:
            broker = ctx.metadata.brokers.get(broker_id)
            return None if broker is None else (broker.host, broker.port)

        config = ctx.config
        return cls(f"txn-markers-{config.broker_id}", config.security.inter_broker(), address_of)

    async def send_markers(
        self,
        leader_id: int,
        entries: Sequence[MarkerEntry],
        timeout_ms: int = MARKERS_TIMEOUT_MS,
    ) -> MarkerErrors:
        """Ask broker `leader_id` to write `entries`' markers; each partition's error
        per entry, None where its marker is committed (see the module's docstring)."""
        if not entries:
            return []
        try:
            connection = await self._connection(leader_id)
            response = await connection.send(
                markers_request(entries, timeout_ms),
                timeout_s=timeout_ms / 1000 + ANSWER_MARGIN_S,
            )
        except ReplogError as exc:
            if exc.retriable:
                logger.info("cannot send transaction markers to broker %d: %s", leader_id, exc)
            return failed_everywhere(entries, exc)
        return answered_errors(entries, response)

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()

    async def _connection(self, broker_id: int) -> BrokerConnection:
        async with self._connecting[broker_id]:
            return await self._usable_connection(broker_id)

    async def _usable_connection(self, broker_id: int) -> BrokerConnection:
        address = self._address_of(broker_id)
        if address is None:
            raise BrokerNotAvailableError(f"broker {broker_id} is not in this broker's metadata")
        host, port = address
        connection = self._connections.get(broker_id)
        if (
            connection is not None
            and connection.is_usable
            and connection.address == f"{host}:{port}"
        ):
            return connection
        if connection is not None:
            await connection.close()
        connection = BrokerConnection(host, port, client_id=self.client_id, security=self.security)
        self._connections[broker_id] = connection
        await connection.connect()
        return connection
