"""Where the transaction coordinator's markers are written: the `WriteMarker` it is given
(brokerd.transactions.markers).

A partition led by this broker takes its marker straight from the coordinator, through
the same leader's code as a WriteTxnMarkers request (brokerd.core.txn_markers: refused
while the ISR is below min.insync.replicas, answered once the high watermark passes the
marker, and told to the marker listeners, which commit transactional offsets). A
partition led by another broker is sent to it (`SendMarkers`: the inter-broker
WriteTxnMarkers call of brokerd.core.txn_marker_sender), which answers an error per
partition. The leader is the one the metadata names now; none is NOT_LEADER_OR_FOLLOWER,
which the markers' retry loop waits out like any leader change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from brokerd.core.context import BrokerContext
from brokerd.core.txn_markers import MarkerEntry, MarkerErrors, write_txn_markers
from brokerd.transactions.markers import NO_LEADER
from spark_replica.errors import NotLeaderOrFollowerError
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition

# (leader broker id, the markers) -> each partition's error per entry, None for written.
SendMarkers = Callable[[int, Sequence[MarkerEntry]], Awaitable[MarkerErrors]]


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
        entry = MarkerEntry(producer_id, producer_epoch, committed, coordinator_epoch, (tp,))
        state = self._ctx.metadata.partitions.get(tp)
        leader = NO_LEADER if state is None else state.leader
        if leader == NO_LEADER:
            raise NotLeaderOrFollowerError(f"{tp} has no leader now")
        if leader == self._ctx.config.broker_id:
            errors = await write_txn_markers(self._ctx, [entry], now_ms())
        else:
            errors = await self._send_markers(leader, [entry])
        error = errors[0].get(tp)
        if error is not None:
            raise error
