"""Answering a Kafka request partition by partition, each with its own error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_replica.errors import BrokerResponseError, ProtocolError, code_of, wire_message
from spark_replica.topics import TopicPartition, validate_topic_name
from spark_replica.wire.schema import Data

# A typed error raised while serving one partition is that partition's answer.
SERVING_ERRORS = (BrokerResponseError, ProtocolError)


def set_error(result: Data, error: BaseException) -> None:
    """Put a typed error into a result (the message only goes out in versions with room)."""
    result.error_code = code_of(error)
    result.error_message = wire_message(error)


def serve_partition(
    topic: str,
    partition: int,
    result: Data,
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
