"""One produce request for one partition's batch, and the reading of its answer.

The client writes batches only this way, from its partition senders
(partition_sender.py), whether the window numbers a batch (the Producer) or its caller
did (the SequencedProducer); they differ in what they make of the answer, not in the
request or in how the answer is read.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from spark_replica.errors import ProtocolError, ReplogError, error_for_code
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import (
    ACKS_NONE,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
)

from .connection import BrokerConnection

# A produce answer may take the request timeout on the broker; this much more is allowed
# for the way there and back before the connection is deemed stuck.
ANSWER_GRACE_S = 5.0


def send_produce(
    conn: BrokerConnection,
    tp: TopicPartition,
    batch: bytes | memoryview,
    acks: int,
    timeout_ms: int,
    transactional_id: str | None = None,
) -> Awaitable[Any]:
    """Write `batch` to `tp`'s leader on `conn`: awaiting it gives the answer (None with
    acks=0, which has none), or raises the connection's error. A transactional producer's
    batch goes with its `transactional_id`."""
    request = ProduceRequest(
        acks,
        timeout_ms,
        [ProduceTopic(tp.topic, [ProducePartition(tp.partition, batch)])],
        transactional_id,
    )
    if acks == ACKS_NONE:
        return conn.send(request, expect_response=False)
    return conn.send(request, timeout_s=timeout_ms / 1000 + ANSWER_GRACE_S)


def read_answer(tp: TopicPartition, response: ProduceResponse) -> tuple[ReplogError | None, int]:
    """The leader's verdict on the batch: its typed error (None when written) and the
    base offset it answered."""
    try:
        result = response.topics[0].partitions[0]
    except IndexError:
        return ProtocolError(f"{tp}: the produce answer names no partition"), -1
    if result.error_code:
        return error_for_code(result.error_code, result.error_message or ""), result.base_offset
    return None, result.base_offset
