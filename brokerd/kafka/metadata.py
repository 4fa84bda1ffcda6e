"""Kafka's Metadata: the cluster as Kafka's clients must see it, at Kafka addresses.

Clients connect to whatever brokers a Metadata answer names, so it names only Kafka
listeners, at their advertised addresses: every live broker with one (the controller's
last UpdateMetadata says which, and where) plus this broker, which can always be
reached. A partition whose leader has no Kafka listener is answered
LEADER_NOT_AVAILABLE, as while an election is under way. Topics are never created by
asking for them (auto-creation is off): an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
Without Describe on a topic the principal does not see it when asking for all topics,
and gets TOPIC_AUTHORIZATION_FAILED when naming it.

A broker that has not yet had the controller's first UpdateMetadata holds the request
until it has (MetadataCache.ready_to_describe), as the native Metadata does.
"""

from __future__ import annotations

from brokerd.core.authorization import authorize_topic, topic_denied
from brokerd.core.context import BrokerContext
from brokerd.core.partitions import set_error
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import (
    BrokerResponseError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from spark_replica.security.acl import Operation
from spark_replica.topics import is_internal, validate_topic_name
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.schema import Data

CLUSTER_ID = "replog"
NO_LEADER = -1


def kafka_brokers(ctx: BrokerContext) -> dict[int, BrokerInfo]:
    """The live brokers with a Kafka listener, this one included, by id."""
    brokers = {b.broker_id: b for b in ctx.metadata.brokers.values() if b.kafka_port >= 0}
    own = ctx.registration
    if own is not None and own.kafka_port >= 0:
        brokers[own.broker_id] = BrokerInfo(
            own.broker_id, own.host, own.port, own.kafka_port, own.kafka_host
        )
    return brokers


async def handle_metadata(ctx: BrokerContext, request: KafkaRequest) -> Data:
    await ctx.metadata.ready_to_describe()
    body = request.body
    brokers = kafka_brokers(ctx)
    # v0 asks for every topic with an empty list; v1+ with null (empty: none at all).
    asked_for_all = body.topics is None or (request.version == 0 and not body.topics)
    if asked_for_all:
        names = [
            name
            for name in ctx.metadata.topics()
            if authorize_topic(ctx, request, Operation.DESCRIBE, name)
        ]
    else:
        names = [topic.name for topic in body.topics]
    topics = []
    for name in names:
        topic = Data(error_code=0, name=name, is_internal=is_internal(name), partitions=[])
        try:
            if not asked_for_all and not authorize_topic(ctx, request, Operation.DESCRIBE, name):
                raise topic_denied(request, Operation.DESCRIBE, name)
            validate_topic_name(name)
            topic.partitions = _partitions(ctx, name, brokers)
        except BrokerResponseError as exc:
            set_error(topic, exc)
        topics.append(topic)
    return Data(
        throttle_time_ms=0,
        brokers=[
            Data(node_id=b.broker_id, host=b.kafka_host, port=b.kafka_port, rack=None)
            for b in sorted(brokers.values(), key=lambda b: b.broker_id)
        ],
        cluster_id=CLUSTER_ID,
        controller_id=ctx.metadata.controller_id,
        topics=topics,
    )


def _partitions(ctx: BrokerContext, name: str, brokers: dict[int, BrokerInfo]) -> list[Data]:
    states = ctx.metadata.partitions_of(name)
    if not states:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    partitions = []
    for state in states:
        reachable = state.leader in brokers
        partitions.append(
            Data(
                error_code=0 if reachable else LeaderNotAvailableError.code,
                partition_index=state.partition,
                leader_id=state.leader if reachable else NO_LEADER,
                leader_epoch=state.leader_epoch,
                replica_nodes=state.replicas,
                isr_nodes=state.isr,
                offline_replicas=[],
            )
        )
    return partitions
