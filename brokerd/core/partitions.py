"""Answering a request partition by partition, each with its own error: both dialects.

`serve_partition` serves one partition into its result (refused if denied, the topic
name checked, then the work); `answer_each_partition` runs it over a request whose topics
and partitions have the native layout. A typed error raised while serving one partition
becomes that partition's error code and message and never affects the others.
`hosted_partition` is this broker's replica of a partition, or the error Kafka answers
for one it does not host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from spark_replica.errors import (
    BrokerResponseError,
    NotLeaderOrFollowerError,
    ProtocolError,
    UnknownTopicOrPartitionError,
    code_of,
    wire_message,
)
from spark_replica.topics import TopicPartition, validate_topic_name

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext
    from brokerd.replication.partition import Partition

# A typed error raised while serving one partition is that partition's answer.
SERVING_ERRORS = (BrokerResponseError, ProtocolError)


def set_error(result: Any, error: BaseException) -> None:
    """Put a typed error into a result: anything with error_code and error_message (Kafka's
    message only goes out in versions with room)."""
    result.error_code = code_of(error)
    result.error_message = wire_message(error)


def serve_partition(
    topic: str,
    partition: int,
    result: Any,
    denied: BrokerResponseError | None,
    serve: Callable[[TopicPartition], Any],
) -> None:
    """Serve one partition into `result`: refused if `denied`, the topic name checked,
    then `serve`; a typed error becomes the result's error and touches nothing else."""
    try:
        if denied is not None:
            raise denied
        validate_topic_name(topic)
        serve(TopicPartition(topic, partition))
    except SERVING_ERRORS as exc:
        set_error(result, exc)


def answer_each_partition(
    topics: Iterable[Any],
    make_topic_result: Callable[[str], Any],
    make_partition_result: Callable[[int], Any],
    serve: Callable[[TopicPartition, Any, Any], None],
) -> list[Any]:
    """Serve every (topic, partition) entry of a request into its own result, each with
    `serve_partition`; the results grouped by topic, in request order."""
    answered = []
    for topic in topics:
        topic_result = make_topic_result(topic.topic)
        for entry in topic.partitions:
            result = make_partition_result(entry.partition)
            serve_partition(
                topic.topic,
                entry.partition,
                result,
                None,
                partial(_serve_entry, serve, entry, result),
            )
            topic_result.partitions.append(result)
        answered.append(topic_result)
    return answered


def _serve_entry(
    serve: Callable[[TopicPartition, Any, Any], None], entry: Any, result: Any, tp: TopicPartition
) -> None:
    serve(tp, entry, result)


def hosted_partition(ctx: BrokerContext, tp: TopicPartition) -> Partition:
    """This broker's replica of `tp`. One it does not host is NOT_LEADER_OR_FOLLOWER when
    the cluster has it elsewhere (the client's metadata is stale) and
    UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such partition."""
    partition = ctx.replicas.partitions.get(tp)
    if partition is None:
        if tp in ctx.metadata.partitions:
            raise NotLeaderOrFollowerError(
                f"broker {ctx.replicas.config.broker_id} holds no replica of {tp}"
            )
        raise UnknownTopicOrPartitionError(f"{tp} does not exist")
    return partition
