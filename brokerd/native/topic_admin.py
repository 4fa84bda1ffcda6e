"""Serving replog's CreateTopics, DeleteTopics and CreatePartitions.

The checks and the ZooKeeper writes are the core's (brokerd/core/topic_admin.py), shared
with the Kafka listener; here each topic's write gets its own result. The answer means
"written", not "every broker has applied it": clients wait on Metadata for the latter.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from brokerd.core.topic_admin import settle_new_topic, write_topic
from spark_replica.errors import (
    ConfigError,
    ReplogError,
    UnknownServerError,
    code_of,
    wire_message,
)
from spark_replica.wire.native.topic_admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    TopicResult,
    TopicResultsResponse,
)
from spark_replica.zk import topic_store


async def handle_create_topics(
    ctx: BrokerContext, request: CreateTopicsRequest
) -> TopicResultsResponse:
    """Each topic with the broker's defaults filled in (settle_new_topic), then written."""
    results = []
    for new in request.topics:
        try:
            partitions, replication = settle_new_topic(
                ctx, new.topic, new.num_partitions, new.replication_factor, new.configs
            )
        except (ReplogError, ConfigError) as exc:
            results.append(TopicResult(new.topic, code_of(exc), wire_message(exc)))
            continue
        create = partial(
            topic_store.create_topic,
            topic=new.topic,
            partitions=partitions,
            replication_factor=replication,
            configs=new.configs,
        )
        results.append(await _run(new.topic, partitions, create, ctx))
    return TopicResultsResponse(results)


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
        await write_topic(ctx, topic, partitions, write)
    except (ReplogError, ConfigError) as exc:
        return TopicResult(topic, code_of(exc), wire_message(exc))
    return TopicResult(topic, 0, None)
