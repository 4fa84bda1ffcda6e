"""Serving a transactional producer's replog requests: FindCoordinator, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit, and a Spark sink task's
RegisterSinkParticipants (replog's own), each a decode and an encode around the
decisions both listeners share (brokerd/transactions/producer_requests.py).

The authorization is the dialect's, before a handler runs (brokerd/native/authorization.py:
Kafka's rules, the request refused whole). Errors that concern the whole request travel in
the response header; AddPartitionsToTxn and TxnOffsetCommit answer per partition. replog's
clients speak the newest version, so PRODUCER_FENCED is never translated for them.

An InitProducerId without a transactional id is an idempotent producer's: any broker
answers from the allocator the Kafka listener shares (brokerd/core/producer_ids.py), with
KIP-360's rule for an existing id and epoch: bumped only when that epoch is the id's
current one, otherwise a new id, so that no client fences another's producer through it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from brokerd.coordination.internal_topic import TxnProducer
from brokerd.core.context import BrokerContext
from brokerd.core.producer_ids import init_producer
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.producer_requests import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    commit_offsets_in_transaction,
    end_transaction,
    find_coordinator,
    init_transactional_producer,
    offset_refused,
    register_sink_participants,
    unknown_partitions,
)
from brokerd.transactions.states import Participant
from spark_replica.errors import (
    BrokerResponseError,
    OperationNotAttemptedError,
    code_of,
    wire_message,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.wire.native.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    TxnPartitionResult,
    TxnTopicResult,
)
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.controller_requests import EmptyResponse
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from spark_replica.wire.native.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    RegisterSinkParticipantsResponse,
)
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

Groups = GroupCoordinator | None
Transactions = TransactionCoordinator | None


async def handle_find_coordinator(
    groups: Groups, transactions: Transactions, ctx: BrokerContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    broker = find_coordinator(groups, transactions, request.key, request.key_type)
    return FindCoordinatorResponse(broker.broker_id, broker.host, broker.port)


async def handle_init_producer_id(
    transactions: Transactions, ctx: BrokerContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is None:
        producer_id, epoch = await init_producer(ctx, request.producer_id, request.producer_epoch)
    else:
        producer_id, epoch = await init_transactional_producer(
            transactions,
            request.transactional_id,
            request.transaction_timeout_ms,
            request.producer_id,
            request.producer_epoch,
        )
    return InitProducerIdResponse(producer_id, epoch)


async def handle_add_partitions_to_txn(
    transactions: Transactions, ctx: BrokerContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    """All the partitions added or none: an unknown one gets its error, the others
    OPERATION_NOT_ATTEMPTED, and the coordinator is not asked."""
    asked = [TopicPartition(t.topic, p) for t in request.topics for p in t.partitions]
    errors: dict[TopicPartition, BrokerResponseError | None]
    unknown = unknown_partitions(ctx, asked)
    if unknown:
        not_attempted = OperationNotAttemptedError("another partition of the request is unknown")
        errors = {tp: unknown.get(tp, not_attempted) for tp in asked}
    else:
        try:
            await add_partitions_to_txn(
                transactions,
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                asked,
            )
            errors = dict.fromkeys(asked)
        except BrokerResponseError as exc:
            errors = dict.fromkeys(asked, exc)
    return AddPartitionsToTxnResponse(_per_topic(errors))


async def handle_add_offsets_to_txn(
    groups: Groups, transactions: Transactions, ctx: BrokerContext, request: AddOffsetsToTxnRequest
) -> EmptyResponse:
    await add_offsets_to_txn(
        groups,
        transactions,
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.group_id,
    )
    return EmptyResponse()


async def handle_end_txn(
    transactions: Transactions, ctx: BrokerContext, request: EndTxnRequest
) -> EmptyResponse:
    await end_transaction(
        transactions,
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
    )
    return EmptyResponse()


async def handle_register_sink_participants(
    transactions: Transactions, ctx: BrokerContext, request: RegisterSinkParticipantsRequest
) -> RegisterSinkParticipantsResponse:
    """A partition the cluster does not have refuses the whole registration, unasked."""
    participants = [
        Participant(TopicPartition(topic.topic, p.partition), p.producer_id, p.producer_epoch)
        for topic in request.topics
        for p in topic.partitions
    ]
    unknown = unknown_partitions(ctx, [p.tp for p in participants])
    if unknown:
        raise next(iter(unknown.values()))
    already_committed = await register_sink_participants(
        transactions,
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.micro_batch,
        participants,
    )
    return RegisterSinkParticipantsResponse(already_committed)


async def handle_txn_offset_commit(
    groups: Groups, ctx: BrokerContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    """Offsets refused one by one (unknown partition, metadata too large) get their
    error; the others are committed together and share the commit's outcome."""
    now_ms = int(time.time() * 1000)
    errors: dict[TopicPartition, BrokerResponseError | None] = {}
    commits: dict[TopicPartition, OffsetValue] = {}
    for topic in request.topics:
        for entry in topic.partitions:
            tp = TopicPartition(topic.topic, entry.partition)
            errors[tp] = offset_refused(ctx, tp, entry.metadata)
            if errors[tp] is None:
                commits[tp] = OffsetValue(entry.offset, entry.leader_epoch, entry.metadata, now_ms)
    if commits:
        try:
            await commit_offsets_in_transaction(
                groups,
                request.group_id,
                TxnProducer(request.producer_id, request.producer_epoch),
                request.member_id,
                request.generation_id,
                request.group_instance_id,
                commits,
            )
        except BrokerResponseError as exc:
            errors.update(dict.fromkeys(commits, exc))
    return TxnOffsetCommitResponse(_per_topic(errors))


def _per_topic(errors: dict[TopicPartition, BrokerResponseError | None]) -> list[TxnTopicResult]:
    by_topic: dict[str, TxnTopicResult] = {}
    for tp, error in errors.items():
        result = TxnPartitionResult(tp.partition)
        if error is not None:
            result.error_code, result.error_message = code_of(error), wire_message(error)
        by_topic.setdefault(tp.topic, TxnTopicResult(tp.topic)).partitions.append(result)
    return list(by_topic.values())


NativeHandler = Callable[[BrokerContext, Any], Awaitable[Any]]


def transaction_handlers(groups: Groups, transactions: Transactions) -> dict[int, NativeHandler]:
    """The transactional producer's APIs, bound to the broker's coordinators."""
    return {
        ApiKey.FIND_COORDINATOR: partial(handle_find_coordinator, groups, transactions),
        ApiKey.INIT_PRODUCER_ID: partial(handle_init_producer_id, transactions),
        ApiKey.ADD_PARTITIONS_TO_TXN: partial(handle_add_partitions_to_txn, transactions),
        ApiKey.ADD_OFFSETS_TO_TXN: partial(handle_add_offsets_to_txn, groups, transactions),
        ApiKey.END_TXN: partial(handle_end_txn, transactions),
        ApiKey.TXN_OFFSET_COMMIT: partial(handle_txn_offset_commit, groups),
        ApiKey.REGISTER_SINK_PARTICIPANTS: partial(handle_register_sink_participants, transactions),
    }
