"""Serving Metadata from the broker's current cluster view."""

from __future__ import annotations

from brokerd.api.context import BrokerContext
from spark_replica.errors import (
    BrokerResponseError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    wire_message,
)
from spark_replica.protocol.metadata import (
    NO_LEADER,
    BrokerInfo,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from spark_replica.topics import TopicPartition, validate_topic_name


async def handle_metadata(ctx: BrokerContext, request: MetadataRequest) -> MetadataResponse:
    view = ctx.view
    brokers = [BrokerInfo(b.broker_id, b.host, b.port) for b in view.brokers.values()]
    names = sorted(view.assignments) if request.topics is None else request.topics
    return MetadataResponse(brokers, view.controller_id, [_describe(ctx, n) for n in names])


def _describe(ctx: BrokerContext, name: str) -> TopicMetadata:
    try:
        validate_topic_name(name)
        assignment = ctx.view.assignments.get(name)
        if assignment is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    except BrokerResponseError as exc:
        return TopicMetadata(name, [], exc.code, wire_message(exc))
    partitions = []
    for partition, replicas in sorted(assignment.partitions.items()):
        state = ctx.view.states.get(TopicPartition(name, partition))
        if state is None or state.leader not in ctx.view.brokers:
            epoch = -1 if state is None else state.leader_epoch
            isr = [] if state is None else state.isr
            partitions.append(
                PartitionMetadata(
                    partition, NO_LEADER, epoch, replicas, isr, LeaderNotAvailableError.code
                )
            )
            continue
        partitions.append(
            PartitionMetadata(partition, state.leader, state.leader_epoch, replicas, state.isr)
        )
    return TopicMetadata(name, partitions)
