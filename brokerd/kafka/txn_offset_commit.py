"""Kafka's TxnOffsetCommit (api key 28, v0-3): a transactional producer commits its
consumer group's offsets inside its transaction (`send_offsets_to_transaction`).

Sent to the group's coordinator, which stores the offsets as the producer's
transactional records and keeps them pending until the transaction's marker
(brokerd/groups/coordinator.py, txn_offsets.py). Kafka's authorization: Write on the
TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), Read
on the group (GROUP_AUTHORIZATION_FAILED for every partition), Read on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions). A partition the cluster does not have
is UNKNOWN_TOPIC_OR_PARTITION, metadata over offset.metadata.max.bytes
OFFSET_METADATA_TOO_LARGE; the group's and the append's errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
INVALID_PRODUCER_EPOCH...) go to every partition that passed those checks. As in Kafka
before KIP-890, the coordinator does not ask the transaction coordinator whether the
group was added to the transaction (AddOffsetsToTxn).
"""

from __future__ import annotations

import time

from brokerd.coordination.internal_topic import TxnProducer
from brokerd.core.authorization import (
    authorize_group,
    authorize_topic,
    authorize_transactional_id,
    group_denied,
    topic_denied,
    transactional_id_denied,
)
from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.kafka.request import KafkaRequest
from brokerd.transactions.producer_requests import commit_offsets_in_transaction, offset_refused
from spark_replica.errors import BrokerResponseError, code_of
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.wire.schema import Data


def request_denied(ctx: BrokerContext, request: KafkaRequest) -> BrokerResponseError | None:
    """Why every partition of the request is refused, if the caller may not commit for
    the transactional id or the group."""
    body = request.body
    if not authorize_transactional_id(ctx, request, Operation.WRITE, body.transactional_id):
        return transactional_id_denied(request, Operation.WRITE, body.transactional_id)
    if not authorize_group(ctx, request, Operation.READ, body.group_id):
        return group_denied(request, Operation.READ, body.group_id)
    return None


async def handle_txn_offset_commit(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    denied = request_denied(ctx, request)
    now_ms = int(time.time() * 1000)
    accepted: list[Data] = []  # answered by the commit's outcome
    commits: dict[TopicPartition, OffsetValue] = {}
    topics = []
    for topic in body.topics:
        topic_allowed = denied is None and authorize_topic(ctx, request, Operation.READ, topic.name)
        answer = Data(name=topic.name, partitions=[])
        for entry in topic.partitions:
            tp = TopicPartition(topic.name, entry.partition_index)
            metadata = entry.committed_metadata or ""
            error: BrokerResponseError | None = denied
            if error is None and not topic_allowed:
                error = topic_denied(request, Operation.READ, topic.name)
            elif error is None:
                error = offset_refused(ctx, tp, metadata)
            partition = Data(partition_index=entry.partition_index, error_code=0)
            if error is None:
                commits[tp] = OffsetValue(
                    entry.committed_offset, entry.committed_leader_epoch, metadata, now_ms
                )
                accepted.append(partition)
            else:
                partition.error_code = error.code
            answer.partitions.append(partition)
        topics.append(answer)
    if accepted:
        try:
            await commit_offsets_in_transaction(
                coordinator,
                body.group_id,
                TxnProducer(body.producer_id, body.producer_epoch),
                body.member_id,
                body.generation_id,
                body.group_instance_id,
                commits,
            )
        except BrokerResponseError as exc:
            for partition in accepted:
                partition.error_code = code_of(exc)
    return Data(throttle_time_ms=0, topics=topics)
