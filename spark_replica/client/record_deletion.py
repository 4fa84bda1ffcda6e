"""Deleting records below offsets (DeleteRecords), partition by partition, on the leaders.

Each partition has its own outcome, as Kafka's admin client reports them: its new low
watermark, or the error that refused it. A partition the cluster does not have is
refused at once (asking its leader cannot help), and so is any refusal retrying cannot
change (offset out of range, authorization); a leader that moves meanwhile is followed
through `leader_call`, until the timeout.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from spark_replica.errors import ReplogError, UnknownTopicOrPartitionError, error_for_code
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)

from .cluster import Cluster
from .connection import BrokerConnection
from .leader_call import call_leaders

# Per partition: its new low watermark (log start offset), or why it was refused.
DeletionOutcome = int | ReplogError


@dataclass(frozen=True)
class _Refused:
    """A refusal the leader answered that retrying cannot change: kept as an answer."""

    error: ReplogError


async def delete_records(
    cluster: Cluster, offsets: Mapping[TopicPartition, int], timeout_s: float
) -> dict[TopicPartition, DeletionOutcome]:
    """Delete the records of each partition below its offset (-1: below the high
    watermark); each partition's outcome."""
    outcomes: dict[TopicPartition, DeletionOutcome] = {}
    existing = await _existing(cluster, sorted({tp.topic for tp in offsets}))
    for tp in offsets:
        if tp not in existing:
            outcomes[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
    asked = [tp for tp in offsets if tp in existing]

    async def ask(
        conn: BrokerConnection, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int | _Refused | ReplogError]:
        return await _ask(conn, {tp: offsets[tp] for tp in tps}, timeout_s)

    answers: dict[TopicPartition, int | _Refused] = await call_leaders(
        cluster, asked, ask, timeout_s=timeout_s, policy=cluster.retry_policy
    )
    for tp, answer in answers.items():
        outcomes[tp] = answer.error if isinstance(answer, _Refused) else answer
    return {tp: outcomes[tp] for tp in offsets}


async def _existing(cluster: Cluster, topics: list[str]) -> set[TopicPartition]:
    response = await cluster.refresh(topics)
    return {
        TopicPartition(topic.topic, p.partition)
        for topic in response.topics
        if not topic.error_code
        for p in topic.partitions
    }


async def _ask(
    conn: BrokerConnection, offsets: dict[TopicPartition, int], timeout_s: float
) -> dict[TopicPartition, int | _Refused | ReplogError]:
    grouped: dict[str, list[DeleteRecordsPartition]] = defaultdict(list)
    for tp, offset in offsets.items():
        grouped[tp.topic].append(DeleteRecordsPartition(tp.partition, offset))
    request = DeleteRecordsRequest(
        [DeleteRecordsTopic(topic, partitions) for topic, partitions in grouped.items()],
        int(timeout_s * 1000),
    )
    response = await conn.send(request)
    answers: dict[TopicPartition, int | _Refused | ReplogError] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            if not p.error_code:
                answers[tp] = p.low_watermark
                continue
            error = error_for_code(p.error_code, p.error_message or str(tp))
            answers[tp] = error if error.retriable else _Refused(error)
    return answers
