"""Kafka's CreateTopics, DeleteTopics and CreatePartitions: replog's topic changes.

Each topic is written to ZooKeeper by spark_replica/zk/topic_store.py, as the replog
listener's handlers do (the answer means "written"; clients wait on Metadata for the
brokers to apply it). validate_only runs the same checks and writes nothing. Replica
assignments chosen by the client are not served (the placement is replog's): such a
topic is refused with INVALID_REQUEST. -1 partitions or replication factor (v4+) take
the broker's num.partitions and default.replication.factor (Kafka's defaults: 1 and 1).
A partition count above max.partitions.per.topic is refused with INVALID_PARTITIONS
before anything is read or built, validate_only or not (brokerd/api/topic_admin.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from kazoo.client import KazooClient

from brokerd.api.topic_admin import check_partition_count
from brokerd.core.context import BrokerContext
from brokerd.kafka.authorization import authorize_cluster, authorize_topic, topic_denied
from brokerd.kafka.partitions import set_error
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import (
    ConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    ReplogError,
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from spark_replica.reassignment import assign_replicas
from spark_replica.security.acl import Operation
from spark_replica.topic_config import parse_topic_configs
from spark_replica.topics import validate_topic_name
from spark_replica.wire.schema import Data
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import translated

USE_DEFAULT = -1


async def _in_zookeeper(
    ctx: BrokerContext,
    result: Data,
    work: Callable[[KazooClient], object],
    partitions: int | None = None,
) -> None:
    """Run one topic's blocking ZooKeeper work, after checking the partition count it asks
    for (if any); its typed failure is the topic's error."""
    try:
        if partitions is not None:
            check_partition_count(ctx, result.name, partitions)
        if ctx.zk is None:
            raise UnknownServerError("the broker has no ZooKeeper session")
        await asyncio.to_thread(work, ctx.zk)
    except (ReplogError, ConfigError) as exc:
        set_error(result, exc)


def _check_new_topic(
    zk: KazooClient, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> None:
    """What creating the topic would check, without writing it (validate_only)."""
    validate_topic_name(topic)
    if partitions < 1:
        raise InvalidPartitionsError(f"partitions must be at least 1, not {partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, not {replication_factor}"
        )
    parse_topic_configs(configs)
    with translated():
        exists = zk.exists(znodes.topic_path(topic))
    if exists:
        raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
    assign_replicas(topic_store.live_broker_ids(zk), partitions, replication_factor)


async def handle_create_topics(ctx: BrokerContext, request: KafkaRequest) -> Data:
    body = request.body
    cluster_allowed = authorize_cluster(ctx, request, Operation.CREATE)
    results = []
    for topic in body.topics:
        partitions = (
            ctx.config.num_partitions
            if topic.num_partitions == USE_DEFAULT
            else topic.num_partitions
        )
        replication = (
            ctx.config.default_replication_factor
            if topic.replication_factor == USE_DEFAULT
            else topic.replication_factor
        )
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        result = Data(
            name=topic.name,
            error_code=0,
            error_message=None,
            num_partitions=partitions,
            replication_factor=replication,
            configs=[],
        )
        results.append(result)
        if not cluster_allowed and not authorize_topic(ctx, request, Operation.CREATE, topic.name):
            set_error(result, topic_denied(request, Operation.CREATE, topic.name))
            continue
        if topic.assignments:
            set_error(
                result,
                InvalidRequestError(
                    "replica assignments are not supported: give num_partitions and "
                    "replication_factor, replog places the replicas"
                ),
            )
            continue
        check = _check_new_topic if body.validate_only else topic_store.create_topic
        work = functools.partial(
            check,
            topic=topic.name,
            partitions=partitions,
            replication_factor=replication,
            configs=configs,
        )
        await _in_zookeeper(ctx, result, work, partitions)
    return Data(throttle_time_ms=0, topics=results)


async def handle_delete_topics(ctx: BrokerContext, request: KafkaRequest) -> Data:
    results = []
    for name in request.body.topic_names:
        result = Data(name=name, error_code=0, error_message=None)
        results.append(result)
        if not authorize_topic(ctx, request, Operation.DELETE, name):
            set_error(result, topic_denied(request, Operation.DELETE, name))
            continue
        await _in_zookeeper(ctx, result, functools.partial(topic_store.delete_topic, topic=name))
    return Data(throttle_time_ms=0, responses=results)


def _check_growth(zk: KazooClient, topic: str, count: int) -> None:
    validate_topic_name(topic)
    assignment = topic_store.read_assignment(zk, topic)
    if assignment is None:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    current = len(assignment.partitions)
    if count <= current:
        raise InvalidPartitionsError(
            f"topic {topic!r} has {current} partitions; it can only grow, not to {count}"
        )


async def handle_create_partitions(ctx: BrokerContext, request: KafkaRequest) -> Data:
    body = request.body
    results = []
    for topic in body.topics:
        result = Data(name=topic.name, error_code=0, error_message=None)
        results.append(result)
        if not authorize_topic(ctx, request, Operation.ALTER, topic.name):
            set_error(result, topic_denied(request, Operation.ALTER, topic.name))
            continue
        if topic.assignments is not None:
            set_error(
                result,
                InvalidRequestError("replica assignments are not supported: replog places them"),
            )
            continue
        grow = _check_growth if body.validate_only else topic_store.add_partitions
        await _in_zookeeper(
            ctx, result, functools.partial(grow, topic=topic.name, count=topic.count), topic.count
        )
    return Data(throttle_time_ms=0, results=results)
