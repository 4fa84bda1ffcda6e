"""Serving ApiVersions, CreateTopics, DeleteTopics and CreatePartitions.

Topic changes are written to ZooKeeper (off the event loop: kazoo blocks); the brokers
pick them up from there like any other change, so the answer means "written", not
"every broker has applied it". Clients wait on Metadata for the latter.

A partition count above max.partitions.per.topic is refused with INVALID_PARTITIONS
before anything is read or built (`check_partition_count`, on both listeners, with
validate_only too): an assignment is built in memory for every partition asked, and
2^31-1 of them would take the broker's memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    ConfigError,
    InvalidPartitionsError,
    ReplogError,
    UnknownServerError,
    code_of,
    wire_message,
)
from spark_replica.wire.native.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from spark_replica.wire.native.apis import SUPPORTED_VERSIONS
from spark_replica.wire.native.topic_admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    TopicResult,
    TopicResultsResponse,
)
from spark_replica.zk import topic_store


async def handle_api_versions(
    ctx: BrokerContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        [ApiVersionRange(int(key), low, high) for key, (low, high) in SUPPORTED_VERSIONS.items()]
    )


def check_partition_count(ctx: BrokerContext, topic: str, partitions: int) -> None:
    """Refuse asking `topic` to have more partitions than max.partitions.per.topic."""
    bound = ctx.config.max_partitions_per_topic
    if partitions > bound:
        raise InvalidPartitionsError(
            f"topic {topic!r}: {partitions} partitions is over the broker's "
            f"max.partitions.per.topic ({bound}); ask for fewer or raise that config"
        )


async def handle_create_topics(
    ctx: BrokerContext, request: CreateTopicsRequest
) -> TopicResultsResponse:
    return await _each_topic(
        ctx,
        [
            (
                new.topic,
                new.num_partitions,
                partial(
                    topic_store.create_topic,
                    topic=new.topic,
                    partitions=new.num_partitions,
                    replication_factor=new.replication_factor,
                    configs=new.configs,
                ),
            )
            for new in request.topics
        ],
    )


async def handle_delete_topics(
    ctx: BrokerContext, request: DeleteTopicsRequest
) -> TopicResultsResponse:
    return await _each_topic(
        ctx,
        [(name, None, partial(topic_store.delete_topic, topic=name)) for name in request.topics],
    )


async def handle_create_partitions(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> TopicResultsResponse:
    return await _each_topic(
        ctx,
        [
            (e.topic, e.count, partial(topic_store.add_partitions, topic=e.topic, count=e.count))
            for e in request.topics
        ],
    )


# Each topic's name, the partition count it asks for (None: not a count), and its write.
TopicWrite = tuple[str, int | None, Callable[[KazooClient], object]]


async def _each_topic(ctx: BrokerContext, writes: list[TopicWrite]) -> TopicResultsResponse:
    """Run each topic's ZooKeeper write in turn; each gets its own result."""
    return TopicResultsResponse(
        [await _run(topic, partitions, write, ctx) for topic, partitions, write in writes]
    )


async def _run(
    topic: str, partitions: int | None, write: Callable[[KazooClient], object], ctx: BrokerContext
) -> TopicResult:
    if ctx.zk is None:
        return TopicResult(topic, UnknownServerError.code, "the broker has no ZooKeeper session")
    try:
        if partitions is not None:
            check_partition_count(ctx, topic, partitions)
        await asyncio.to_thread(write, ctx.zk)
    except (ReplogError, ConfigError) as exc:
        return TopicResult(topic, code_of(exc), wire_message(exc))
    return TopicResult(topic, 0, None)
