"""Kafka's CreateTopics, DeleteTopics and CreatePartitions: replog's topic changes.

Each topic is written to ZooKeeper by spark_replica/zk/topic_store.py, as the replog
listener's handlers do; with a timeout_ms above 0 the answer then waits, as Kafka's does,
until this broker's metadata names a leader for each partition written, and a topic still
lacking one at the timeout is answered REQUEST_TIMED_OUT (brokerd/core/leader_wait.py).
validate_only runs the same checks and writes nothing. Replica
assignments chosen by the client are not served (the placement is replog's): such a
topic is refused with INVALID_REQUEST. -1 partitions or replication factor (v4+) take
the broker's num.partitions and default.replication.factor (Kafka's defaults: 1 and 1),
as the replog listener's do (settle_new_topic); a min.insync.replicas above the
replication factor is refused with INVALID_CONFIG.
A partition count above max.partitions.per.topic is refused with INVALID_PARTITIONS
before anything is read or built, validate_only or not (brokerd/core/topic_admin.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kazoo.client import KazooClient

from brokerd.core.authorization import authorize_cluster, authorize_topic, topic_denied
from brokerd.core.context import BrokerContext
from brokerd.core.leader_wait import still_present, without_leaders
from brokerd.core.partitions import set_error
from brokerd.core.topic_admin import (
    check_growth,
    check_new_topic,
    settle_new_topic,
    write_topic,
)
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import (
    ConfigError,
    InvalidRequestError,
    ReplogError,
    RequestTimedOutError,
)
from spark_replica.security.acl import Operation
from spark_replica.wire.schema import Data
from spark_replica.zk import topic_store


async def _in_zookeeper(
    ctx: BrokerContext,
    result: Data,
    work: Callable[[KazooClient], object],
    partitions: int | None = None,
) -> None:
    """One topic's ZooKeeper work (brokerd/core/topic_admin.py); its typed failure is the
    topic's error."""
    try:
        await write_topic(ctx, result.name, partitions, work)
    except (ReplogError, ConfigError) as exc:
        set_error(result, exc)


async def _until_served(
    ctx: BrokerContext, results: list[Data], partitions: dict[str, int], timeout_ms: int
) -> None:
    """Wait until this broker's metadata names a leader for each of the `partitions`
    (topic → count) of the written topics among `results`; each one still lacking one
    after timeout_ms gets REQUEST_TIMED_OUT (it is written all the same)."""
    written = {r.name: partitions[r.name] for r in results if r.error_code == 0}
    if timeout_ms <= 0 or not written:
        return
    missing = await without_leaders(ctx.metadata, written, timeout_ms / 1000)
    _time_out(
        results,
        missing,
        f"is written, but not every partition had a leader on this broker within "
        f"timeout_ms={timeout_ms}",
    )


def _time_out(results: list[Data], topics: set[str], why: str) -> None:
    """REQUEST_TIMED_OUT for each result of `topics`: `topic 'name' <why>`."""
    for result in results:
        if result.name in topics:
            set_error(result, RequestTimedOutError(f"topic {result.name!r} {why}"))


async def handle_create_topics(ctx: BrokerContext, request: KafkaRequest) -> Data:
    body = request.body
    cluster_allowed = authorize_cluster(ctx, request, Operation.CREATE)
    results = []
    partition_counts: dict[str, int] = {}
    for topic in body.topics:
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        result = Data(
            name=topic.name,
            error_code=0,
            error_message=None,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            configs=[],
        )
        results.append(result)
        try:
            partitions, replication = settle_new_topic(
                ctx, topic.name, topic.num_partitions, topic.replication_factor, configs
            )
        except (ReplogError, ConfigError) as exc:
            set_error(result, exc)
            continue
        result.num_partitions, result.replication_factor = partitions, replication
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
        check = check_new_topic if body.validate_only else topic_store.create_topic
        work = functools.partial(
            check,
            topic=topic.name,
            partitions=partitions,
            replication_factor=replication,
            configs=configs,
        )
        await _in_zookeeper(ctx, result, work, partitions)
        partition_counts[topic.name] = partitions
    if not body.validate_only:
        await _until_served(ctx, results, partition_counts, body.timeout_ms)
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
    await _until_gone(ctx, results, request.body.timeout_ms)
    return Data(throttle_time_ms=0, responses=results)


async def _until_gone(ctx: BrokerContext, results: list[Data], timeout_ms: int) -> None:
    """Wait until this broker's metadata no longer has the topics whose deletion was
    written; each still there after timeout_ms gets REQUEST_TIMED_OUT (it is deleted all
    the same, later)."""
    written = {r.name for r in results if r.error_code == 0}
    if timeout_ms <= 0 or not written:
        return
    present = await still_present(ctx.metadata, written, timeout_ms / 1000)
    _time_out(
        results,
        present,
        f"is queued for deletion, but this broker still had it after timeout_ms={timeout_ms}",
    )


async def handle_create_partitions(ctx: BrokerContext, request: KafkaRequest) -> Data:
    body = request.body
    results = []
    partition_counts: dict[str, int] = {}
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
        grow = check_growth if body.validate_only else topic_store.add_partitions
        await _in_zookeeper(
            ctx, result, functools.partial(grow, topic=topic.name, count=topic.count), topic.count
        )
        partition_counts[topic.name] = topic.count
    if not body.validate_only:
        await _until_served(ctx, results, partition_counts, body.timeout_ms)
    return Data(throttle_time_ms=0, results=results)
