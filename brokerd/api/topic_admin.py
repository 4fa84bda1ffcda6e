"""Serving ApiVersions, CreateTopics, DeleteTopics and CreatePartitions.

Topic changes are written to ZooKeeper (off the event loop: kazoo blocks); the brokers
pick them up from there like any other change, so the answer means "written", not
"every broker has applied it". Clients wait on Metadata for the latter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from kazoo.client import KazooClient

from brokerd.api.context import BrokerContext
from spark_replica.errors import (
    ConfigError,
    ReplogError,
    UnknownServerError,
    code_of,
    wire_message,
)
from spark_replica.protocol.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from spark_replica.protocol.apis import SUPPORTED_VERSIONS
from spark_replica.protocol.topic_admin import (
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


async def handle_create_topics(
    ctx: BrokerContext, request: CreateTopicsRequest
) -> TopicResultsResponse:
    return await _each_topic(
        ctx,
        [
            (
                new.topic,
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
        ctx, [(name, partial(topic_store.delete_topic, topic=name)) for name in request.topics]
    )


async def handle_create_partitions(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> TopicResultsResponse:
    return await _each_topic(
        ctx,
        [
            (e.topic, partial(topic_store.add_partitions, topic=e.topic, count=e.count))
            for e in request.topics
        ],
    )


async def _each_topic(
    ctx: BrokerContext, writes: list[tuple[str, Callable[[KazooClient], object]]]
) -> TopicResultsResponse:
    """Run each topic's ZooKeeper write in turn; each gets its own result."""
    return TopicResultsResponse([await _run(topic, write, ctx) for topic, write in writes])


async def _run(
    topic: str, write: Callable[[KazooClient], object], ctx: BrokerContext
) -> TopicResult:
    if ctx.zk is None:
        return TopicResult(topic, UnknownServerError.code, "the broker has no ZooKeeper session")
    try:
        await asyncio.to_thread(write, ctx.zk)
    except (ReplogError, ConfigError) as exc:
        return TopicResult(topic, code_of(exc), wire_message(exc))
    return TopicResult(topic, 0, None)
