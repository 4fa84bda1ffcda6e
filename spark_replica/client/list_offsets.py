"""Offsets by position or time from partition leaders: log start, high watermark, log end.

`list_offsets` is the retrying lookup every caller uses (the consumer's seeks, the
Spark source's planning): partitions are asked of their leaders through
`leader_call.call_leaders`, so a leader that moves or dies while a query plans delays
the answer instead of failing it. `list_offsets_at` is one request to one broker, for
callers that ask a particular replica (describe shows every replica's log end).
A read_committed caller's LATEST is the last stable offset (ListOffsets v1).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from spark_replica.errors import ReplogError, error_for_code
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.list_offsets import (
    DEBUG_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

from .cluster import Cluster
from .connection import BrokerConnection
from .leader_call import call_leaders
from .retry import RetryPolicy

# Offset specs for list_offsets: the log start offset, and the high watermark (the end
# of what consumers may read). Any other value asks for the first offset whose record
# timestamp is at or after it (milliseconds since the epoch).
EARLIEST = EARLIEST_TIMESTAMP
LATEST = LATEST_TIMESTAMP

# A leader that takes longer than this to answer is asked again (it may be frozen or
# gone); the overall wait is the caller's.
ANSWER_WAIT_S = 5.0

# (offset, timestamp of the record found, or -1 for EARLIEST and LATEST)
OffsetAndTimestamp = tuple[int, int]


async def list_offsets(
    cluster: Cluster,
    partitions: Iterable[TopicPartition],
    timestamp: int,
    *,
    wait_s: float,
    partial: bool = False,
    log_end: bool = False,
    policy: RetryPolicy | None = None,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """(offset, record timestamp) per partition from its leader.

    `timestamp` is EARLIEST, LATEST or a time in ms; with `log_end`, LATEST means the
    leader's log end offset rather than its high watermark (records past the HW are not
    committed yet: a reader that found its position past the log end knows the log was
    truncated); under read_committed `isolation_level` it means the last stable offset,
    and a time is looked up below it. A partition whose leader is moving is asked again
    with fresh metadata until `wait_s` has passed; then, with `partial`, it is left out
    of the answer (the caller plans without it this time), else TimeoutExpiredError
    names it.
    """
    replica_id = DEBUG_REPLICA_ID if log_end else -1

    async def ask(
        conn: BrokerConnection, tps: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndTimestamp | ReplogError]:
        return await _ask(conn, tps, timestamp, replica_id, isolation_level=isolation_level)

    return await call_leaders(
        cluster,
        partitions,
        ask,
        timeout_s=wait_s,
        policy=policy or cluster.retry_policy,
        partial=partial,
    )


async def list_offsets_at(
    cluster: Cluster,
    broker_id: int,
    partitions: list[TopicPartition],
    timestamp: int,
    *,
    log_end: bool = False,
    answer_wait_s: float = ANSWER_WAIT_S,
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """One ListOffsets to one broker, no retries; raises the first partition error.

    With `log_end` any replica answers, with its own log end offset for LATEST.
    """
    conn = await cluster.connection(broker_id)
    replica_id = DEBUG_REPLICA_ID if log_end else -1
    answers = await _ask(conn, partitions, timestamp, replica_id, answer_wait_s)
    found: dict[TopicPartition, OffsetAndTimestamp] = {}
    for tp, answer in answers.items():
        if isinstance(answer, ReplogError):
            raise answer
        found[tp] = answer
    return found


async def _ask(
    conn: BrokerConnection,
    partitions: list[TopicPartition],
    timestamp: int,
    replica_id: int,
    answer_wait_s: float = ANSWER_WAIT_S,
    *,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[TopicPartition, OffsetAndTimestamp | ReplogError]:
    grouped: dict[str, list[ListOffsetsPartition]] = defaultdict(list)
    for tp in partitions:
        grouped[tp.topic].append(ListOffsetsPartition(tp.partition, timestamp))
    topics = [ListOffsetsTopic(t, ps) for t, ps in grouped.items()]
    request = ListOffsetsRequest(topics, replica_id, isolation_level)
    response = await conn.send(request, timeout_s=answer_wait_s)
    answers: dict[TopicPartition, OffsetAndTimestamp | ReplogError] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            if p.error_code:
                answers[tp] = error_for_code(p.error_code, p.error_message or str(tp))
            else:
                answers[tp] = (p.offset, p.timestamp)
    return answers
