"""Serving Metadata from the broker's metadata cache (the controller's last word), once it
has had that word (MetadataCache.ready_to_describe: a broker that registered a moment ago
would otherwise name no controller and no broker but itself)."""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    BrokerResponseError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    wire_message,
)
from spark_replica.topics import validate_topic_name
from spark_replica.wire.native.metadata import (
    NO_LEADER,
    BrokerInfo,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)


async def handle_metadata(ctx: BrokerContext, request: MetadataRequest) -> MetadataResponse:
    cache = ctx.metadata
    await cache.ready_to_describe()
    brokers = dict(cache.brokers)
    if ctx.registration is not None:
        # A serving broker is alive whatever the cache says: clients can always reach it.
        own = ctx.registration
        brokers.setdefault(own.broker_id, BrokerInfo(own.broker_id, own.host, own.port))
    names = cache.topics() if request.topics is None else request.topics
    return MetadataResponse(
        sorted(brokers.values(), key=lambda b: b.broker_id),
        cache.controller_id,
        [_describe(ctx, name) for name in names],
    )


def _describe(ctx: BrokerContext, name: str) -> TopicMetadata:
    try:
        validate_topic_name(name)
        states = ctx.metadata.partitions_of(name)
        if not states:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    except BrokerResponseError as exc:
        return TopicMetadata(name, [], exc.code, wire_message(exc))
    partitions = []
    for state in states:
        if state.leader in ctx.metadata.brokers:
            partitions.append(
                PartitionMetadata(
                    state.partition, state.leader, state.leader_epoch, state.replicas, state.isr
                )
            )
        else:
            partitions.append(
                PartitionMetadata(
                    state.partition,
                    NO_LEADER,
                    state.leader_epoch,
                    state.replicas,
                    state.isr,
                    LeaderNotAvailableError.code,
                )
            )
    return TopicMetadata(name, partitions)
