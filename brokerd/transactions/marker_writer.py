"""Where the transaction coordinator's markers are written: the `WriteMarkers` it is given
(brokerd.transactions.markers), one partition's markers at a time, in one request.

A partition led by this broker takes its markers straight from the coordinator, through
the same leader's code as a WriteTxnMarkers request (brokerd.core.txn_markers: refused
while the ISR is below min.insync.replicas, answered once the high watermark passes the
markers, and told to the marker listeners, which commit transactional offsets). A
partition led by another broker is sent to it (`SendMarkers`: the inter-broker
WriteTxnMarkers call of brokerd.core.txn_marker_sender), which answers an error per
entry and partition. Either way the leader appends the partition's markers in one
append. The leader is the one the metadata names now; none is NOT_LEADER_OR_FOLLOWER,
which the markers' retry loop waits out like any leader change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from brokerd.core.context import BrokerContext
from brokerd.core.txn_markers import MarkerEntry, MarkerErrors, write_txn_markers
from brokerd.transactions.markers import NO_LEADER, Marker
from spark_replica.errors import NotLeaderOrFollowerError
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition

# (leader broker id, the markers) -> each partition's error per entry, None for written.
SendMarkers = Callable[[int, Sequence[MarkerEntry]], Awaitable[MarkerErrors]]


class MarkerWriter:
    """The coordinator's `WriteMarkers`: one partition's markers, at its leader."""

    def __init__(self, ctx: BrokerContext, send_markers: SendMarkers) -> None:
        self._ctx = ctx
        self._send_markers = send_markers

    async def __call__(self, tp: TopicPartition, markers: Sequence[Marker]) -> None:
        """Return once every marker is committed; else raise an error a marker got, one
        that is not retriable first (a fence stops the coordinator's markers)."""
        entries = [
            MarkerEntry(m.producer_id, m.producer_epoch, m.committed, m.coordinator_epoch, (tp,))
            for m in markers
        ]
        state = self._ctx.metadata.partitions.get(tp)
        leader = NO_LEADER if state is None else state.leader
        if leader == NO_LEADER:
            raise NotLeaderOrFollowerError(f"{tp} has no leader now")
        if leader == self._ctx.config.broker_id:
            errors = await write_txn_markers(self._ctx, entries, now_ms())
        else:
            errors = await self._send_markers(leader, entries)
        failed = [error for each in errors if (error := each.get(tp)) is not None]
        if failed:
            raise next((error for error in failed if not error.retriable), failed[0])
