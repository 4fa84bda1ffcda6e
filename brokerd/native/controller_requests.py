"""Serving the controller's LeaderAndIsr and UpdateMetadata, and OffsetsForLeaderEpoch.

Controller requests are fenced twice: a controller epoch older than the newest seen is
a deposed controller (STALE_CONTROLLER_EPOCH), and a broker epoch older than this
incarnation's registration was meant for a broker that has since restarted
(STALE_BROKER_EPOCH). Both refuse the whole request. A broker epoch newer than the one
this broker knows means it is registering again right now: that is retriable.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from brokerd.core.context import BrokerContext
from brokerd.core.partitions import answer_each_partition
from spark_replica.errors import (
    BrokerNotAvailableError,
    NotControllerError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartitions,
)
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    EmptyResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    PartitionLeaderState,
    StopReplicaRequest,
    TopicErrors,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.offsets_for_leader_epoch import (
    EpochEndOffset,
    EpochEndOffsetTopic,
    EpochQuery,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from spark_replica.zk import topic_store

# One INFO line per LeaderAndIsr: with thousands of partitions in a request, a line per
# partition cost more than applying it (the per-partition lines are brokerd.partition's DEBUG).
logger = logging.getLogger("brokerd.leader_and_isr")
metadata_logger = logging.getLogger("brokerd.update_metadata")


def check_controller(ctx: BrokerContext, header: ControllerHeader) -> None:
    if header.controller_epoch < ctx.controller_epoch:
        raise StaleControllerEpochError(
            f"controller epoch {header.controller_epoch} is older than {ctx.controller_epoch}"
        )
    if header.broker_epoch > ctx.broker_epoch:
        # A registration newer than the one we know of is ours, being made right now
        # (czxids only grow): the controller should retry in a moment.
        raise BrokerNotAvailableError(
            f"this broker is still registering (epoch {header.broker_epoch}); retry shortly"
        )
    if header.broker_epoch < ctx.broker_epoch:
        raise StaleBrokerEpochError(
            f"request for broker epoch {header.broker_epoch}, this broker is at {ctx.broker_epoch}"
        )
    ctx.controller_epoch = header.controller_epoch


async def handle_leader_and_isr(
    ctx: BrokerContext, request: LeaderAndIsrRequest
) -> LeaderAndIsrResponse:
    check_controller(ctx, request.header)
    leaders = {b.broker_id: (b.host, b.port) for b in request.leaders}
    configs = await _configs_of_new_topics(ctx, request)
    now = now_ms()
    roles: Counter[str] = Counter()

    def serve(tp: TopicPartition, state: PartitionLeaderState, result: PartitionError) -> None:
        partition = ctx.replicas.ensure_partition(tp, configs.get(tp.topic, {}), now)
        was_leader = partition.is_leader
        new_leader = ctx.replicas.apply_leader_and_isr(
            partition, state, request.header.controller_epoch, now
        )
        if state.leader in leaders and not partition.is_leader:
            ctx.fetchers.follow(partition, state.leader, leaders[state.leader], new_leader)
            roles["following"] += 1
        else:
            # Leading, or no live leader (NO_LEADER: every ISR member is down): fetch
            # from nobody until a LeaderAndIsr names a leader.
            ctx.fetchers.unfollow(tp)
            roles["leading" if partition.is_leader else "leaderless"] += 1
            if partition.is_leader and not was_leader:
                roles["newly leading"] += 1

    topics = answer_each_partition(request.topics, TopicErrors, PartitionError, serve)
    for listener in ctx.role_listeners:
        listener()
    refused = sum(1 for topic in topics for p in topic.partitions if p.error_code)
    logger.info(
        "LeaderAndIsr from controller %d (epoch %d): leading %d (%d newly), following %d, "
        "without a live leader %d, refused %d",
        request.header.controller_id,
        request.header.controller_epoch,
        roles["leading"],
        roles["newly leading"],
        roles["following"],
        roles["leaderless"],
        refused,
    )
    return LeaderAndIsrResponse(topics)


async def _configs_of_new_topics(
    ctx: BrokerContext, request: LeaderAndIsrRequest
) -> dict[str, dict[str, str]]:
    """Topic configs for partitions this broker does not host yet (read from ZooKeeper)."""
    new_topics = {
        t.topic
        for t in request.topics
        for p in t.partitions
        if TopicPartition(t.topic, p.partition) not in ctx.replicas.partitions
    }
    if not new_topics or ctx.zk is None:
        return {}
    zk = ctx.zk

    def read() -> dict[str, dict[str, str]]:
        return {topic: topic_store.read_topic_config(zk, topic) for topic in new_topics}

    return await asyncio.to_thread(read)


async def handle_update_metadata(
    ctx: BrokerContext, request: UpdateMetadataRequest
) -> EmptyResponse:
    check_controller(ctx, request.header)
    ctx.metadata.update(request)
    for listener in ctx.role_listeners:
        listener()
    live = {b.broker_id for b in request.brokers}
    states = [p for topic in request.topics for p in topic.partitions]
    # One line per update: when each broker learnt of a controller decision (what
    # benchmarks/controller_scale.py times failovers by).
    metadata_logger.info(
        "UpdateMetadata from controller %d (epoch %d): %d partitions, %d without a live "
        "leader, brokers %s",
        request.header.controller_id,
        request.header.controller_epoch,
        len(states),
        sum(1 for p in states if p.leader not in live),
        sorted(live),
    )
    return EmptyResponse()


async def handle_offsets_for_leader_epoch(
    ctx: BrokerContext, request: OffsetsForLeaderEpochRequest
) -> OffsetsForLeaderEpochResponse:
    def serve(tp: TopicPartition, query: EpochQuery, result: EpochEndOffset) -> None:
        partition = ctx.replicas.get_partition(tp)
        partition.require_leader()
        partition.check_leader_epoch(query.current_leader_epoch)
        result.leader_epoch, result.end_offset = partition.log.end_offset_for_epoch(
            query.leader_epoch
        )

    return OffsetsForLeaderEpochResponse(
        answer_each_partition(request.topics, EpochEndOffsetTopic, EpochEndOffset, serve)
    )


async def handle_stop_replica(
    ctx: BrokerContext, request: StopReplicaRequest
) -> LeaderAndIsrResponse:
    """Stop following (and with `delete_partitions`, delete) the named partitions."""
    check_controller(ctx, request.header)
    topics = []
    for topic in request.topics:
        results = TopicErrors(topic.topic)
        for number in topic.partitions:
            tp = TopicPartition(topic.topic, number)
            ctx.fetchers.unfollow(tp)
            partition = ctx.replicas.partitions.get(tp)
            if partition is not None:
                if request.delete_partitions:
                    ctx.replicas.delete_partition(tp)
                else:
                    partition.step_down()
            results.partitions.append(PartitionError(number))
        topics.append(results)
    for listener in ctx.role_listeners:
        listener()
    return LeaderAndIsrResponse(topics)


async def handle_controlled_shutdown(
    ctx: BrokerContext, request: ControlledShutdownRequest
) -> ControlledShutdownResponse:
    """Served by the controller's broker: hand the request to its controller."""
    if ctx.controller is None:
        raise NotControllerError(f"broker {ctx.config.broker_id} is not the controller")
    remaining = await ctx.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    grouped: dict[str, list[int]] = {}
    for tp in remaining:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return ControlledShutdownResponse(
        [RemainingPartitions(topic, partitions) for topic, partitions in sorted(grouped.items())]
    )
