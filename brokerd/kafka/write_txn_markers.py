"""Kafka's WriteTxnMarkers (api key 27, v0-v1): end transactions on this broker's
partitions, as a coordinator or `kafka-transactions abort` asks.

Only the brokers' own principal may send it (ClusterAction on the Cluster, as Kafka
requires); anyone else gets CLUSTER_AUTHORIZATION_FAILED for every partition named. The
rules, the per-partition errors and the wait for the HW are brokerd/core/txn_markers.py's,
shared with replog's inter-broker API of the same number.
"""

from __future__ import annotations

from brokerd.core.authorization import authorize_cluster, cluster_denied
from brokerd.core.context import BrokerContext
from brokerd.core.deferred import Deferred
from brokerd.core.txn_markers import MarkerEntry, MarkerErrors, write_txn_markers
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import ReplogError, code_of
from spark_replica.records import now_ms
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data


def marker_entries(body: Data) -> list[MarkerEntry]:
    """The request's markers, each with the partitions it names in request order."""
    return [
        MarkerEntry(
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            committed=marker.transaction_result,
            coordinator_epoch=marker.coordinator_epoch,
            partitions=tuple(
                TopicPartition(topic.name, index)
                for topic in marker.topics
                for index in topic.partition_indexes
            ),
        )
        for marker in body.markers
    ]


def marker_answers(entries: list[MarkerEntry], errors: MarkerErrors) -> Data:
    """The response: per marker its producer id and each partition's error, grouped by
    topic in the order the request named them."""
    markers = []
    for entry, outcome in zip(entries, errors, strict=True):
        by_topic: dict[str, list[Data]] = {}
        for tp, error in outcome.items():
            by_topic.setdefault(tp.topic, []).append(
                Data(
                    partition_index=tp.partition, error_code=0 if error is None else code_of(error)
                )
            )
        topics = [Data(name=name, partitions=found) for name, found in by_topic.items()]
        markers.append(Data(producer_id=entry.producer_id, topics=topics))
    return Data(markers=markers)


def refused_everywhere(entries: list[MarkerEntry], error: ReplogError) -> MarkerErrors:
    return [dict.fromkeys(entry.partitions, error) for entry in entries]


async def handle_write_txn_markers(ctx: BrokerContext, request: KafkaRequest) -> Data | Deferred:
    entries = marker_entries(request.body)
    if not authorize_cluster(ctx, request, Operation.CLUSTER_ACTION):
        denied = cluster_denied(request, Operation.CLUSTER_ACTION)
        return marker_answers(entries, refused_everywhere(entries, denied))

    async def rest() -> Data:
        return marker_answers(entries, await write_txn_markers(ctx, entries, now_ms()))

    return Deferred(rest())
