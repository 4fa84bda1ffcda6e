"""Where the transaction coordinator's markers are written: the `WriteMarker` it is given
(brokerd.transactions.markers).

A partition led by this broker takes its marker straight from the coordinator: appended
through `Partition.append_markers` and waited for until the high watermark passes it,
as Kafka's WriteTxnMarkers appends with acks=all. A partition led by another broker is
sent to it (`SendMarkers`, the inter-broker WriteTxnMarkers call), which answers an error
per partition. The leader is the one the metadata names now; a partition this broker is
named to lead but does not host yet answers NOT_LEADER_OR_FOLLOWER, which the markers'
retry loop waits out like any leader change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from brokerd.core.context import BrokerContext
from brokerd.replication.partition import TxnMarker
from brokerd.transactions.markers import NO_LEADER
from spark_replica.errors import (
    BrokerNotAvailableError,
    BrokerResponseError,
    NotLeaderOrFollowerError,
)
from spark_replica.records import ControlType, now_ms
from spark_replica.topics import TopicPartition

# How long a marker waits for the in-sync copies: Kafka's WriteTxnMarkers is sent with
# request.timeout.ms, whose default this is.
MARKER_TIMEOUT_S = 30.0

# (context, leader broker id, the markers by partition) -> each partition's error, None
# for written (the other side's inter-broker WriteTxnMarkers).
SendMarkers = Callable[
    [BrokerContext, int, Sequence[tuple[TopicPartition, TxnMarker]]],
    Awaitable[dict[TopicPartition, BrokerResponseError | None]],
]


async def send_no_markers(
    ctx: BrokerContext, leader_id: int, markers: Sequence[tuple[TopicPartition, TxnMarker]]
) -> dict[TopicPartition, BrokerResponseError | None]:
    """The `SendMarkers` of a broker without the inter-broker WriteTxnMarkers call: every
    marker for a partition led elsewhere is answered retriable, so its transaction stays
    prepared (CONCURRENT_TRANSACTIONS to its producer) rather than completing without it."""
    return {
        tp: BrokerNotAvailableError(f"markers are not sent to broker {leader_id} by this broker")
        for tp, _ in markers
    }


class MarkerWriter:
    """The coordinator's `WriteMarker`: one marker, at its partition's leader."""

    def __init__(self, ctx: BrokerContext, send_markers: SendMarkers) -> None:
        self._ctx = ctx
        self._send_markers = send_markers

    async def __call__(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> None:
        control = ControlType.COMMIT if committed else ControlType.ABORT
        marker = TxnMarker(producer_id, producer_epoch, coordinator_epoch, control)
        state = self._ctx.metadata.partitions.get(tp)
        leader = NO_LEADER if state is None else state.leader
        if leader == self._ctx.config.broker_id:
            await self.append_here(tp, marker)
            return
        if leader == NO_LEADER:
            raise NotLeaderOrFollowerError(f"{tp} has no leader now")
        errors = await self._send_markers(self._ctx, leader, [(tp, marker)])
        error = errors.get(tp)
        if error is not None:
            raise error

    async def append_here(self, tp: TopicPartition, marker: TxnMarker) -> None:
        """Append the marker as this partition's leader and wait until it is committed."""
        partition = self._ctx.replicas.partitions.get(tp)
        if partition is None:
            raise NotLeaderOrFollowerError(f"broker {self._ctx.config.broker_id} hosts no {tp} yet")
        (appended,) = partition.append_markers([marker], now_ms())
        await partition.wait_for_high_watermark(appended.last_offset, MARKER_TIMEOUT_S)
