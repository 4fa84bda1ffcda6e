"""Serving ApiVersions, CreateTopics, DeleteTopics and CreatePartitions.

Topic changes are written to ZooKeeper (off the event loop: kazoo blocks); the brokers
pick them up from there like any other change, so the answer means "written", not
"every broker has applied it". Clients wait on Metadata for the latter.
"""

from __future__ import annotations

import asyncio

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
    results = []
    for new in request.topics:
        results.append(
            await _run(
                new.topic,
                lambda zk, new=new: topic_store.create_topic(
                    zk, new.topic, new.num_partitions, new.replication_factor, new.configs
                ),
                ctx,
            )
        )
    return TopicResultsResponse(results)


async def handle_delete_topics(
    ctx: BrokerContext, request: DeleteTopicsRequest
) -> TopicResultsResponse:
    results = []
    for name in request.topics:
        results.append(
            await _run(name, lambda zk, name=name: topic_store.delete_topic(zk, name), ctx)
        )
    return TopicResultsResponse(results)


async def handle_create_partitions(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> TopicResultsResponse:
    results = []
    for entry in request.topics:
        results.append(
            await _run(
                entry.topic,
                lambda zk, entry=entry: topic_store.add_partitions(zk, entry.topic, entry.count),
                ctx,
            )
        )
    return TopicResultsResponse(results)


async def _run(topic: str, write, ctx: BrokerContext) -> TopicResult:
    if ctx.zk is None:
        return TopicResult(topic, UnknownServerError.code, "the broker has no ZooKeeper session")
    try:
        await asyncio.to_thread(write, ctx.zk)
    except (ReplogError, ConfigError) as exc:
        return TopicResult(topic, code_of(exc), wire_message(exc))
    return TopicResult(topic, 0, None)
