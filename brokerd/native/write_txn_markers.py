"""Serving the replog listener's WriteTxnMarkers: a transaction coordinator on another
broker ends transactions on the partitions this broker leads.

Only brokers may send it (ClusterAction on the Cluster, decided before the handler runs:
authorization.py). The rules, the per-partition errors and the wait for the HW are
brokerd/core/txn_markers.py's, shared with the Kafka listener's API of the same number.
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.txn_markers import MarkerEntry, MarkerErrors, write_txn_markers
from spark_replica.errors import code_of, wire_message
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.write_txn_markers import (
    MarkerPartitionResult,
    MarkerTopicResult,
    TxnMarkerRequestEntry,
    TxnMarkerResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)


def marker_entry(marker: TxnMarkerRequestEntry) -> MarkerEntry:
    return MarkerEntry(
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        committed=marker.committed,
        coordinator_epoch=marker.coordinator_epoch,
        partitions=tuple(
            TopicPartition(topic.topic, index)
            for topic in marker.topics
            for index in topic.partitions
        ),
    )


def marker_response(entries: list[MarkerEntry], errors: MarkerErrors) -> WriteTxnMarkersResponse:
    markers = []
    for entry, outcome in zip(entries, errors, strict=True):
        by_topic: dict[str, MarkerTopicResult] = {}
        for tp, error in outcome.items():
            result = MarkerPartitionResult(tp.partition)
            if error is not None:
                result.error_code = code_of(error)
                result.error_message = wire_message(error)
            by_topic.setdefault(tp.topic, MarkerTopicResult(tp.topic)).partitions.append(result)
        markers.append(TxnMarkerResult(entry.producer_id, list(by_topic.values())))
    return WriteTxnMarkersResponse(markers)


async def handle_write_txn_markers(ctx: BrokerContext, request: WriteTxnMarkersRequest) -> Deferred:
    entries = [marker_entry(marker) for marker in request.markers]

    async def rest() -> WriteTxnMarkersResponse:
        errors = await write_txn_markers(ctx, entries, now_ms(), request.timeout_ms)
        return marker_response(entries, errors)

    return Deferred(rest())
