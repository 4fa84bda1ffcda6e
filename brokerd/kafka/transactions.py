"""The transaction APIs of the Kafka listener that the transactional id's coordinator
serves: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions. Requests in, the coordinator's (brokerd/transactions/coordinator.py)
answers out, errors where each layout has room for them and as each version knows them
(brokerd/kafka/transaction_errors.py). InitProducerId is brokerd/kafka/producer_id.py,
FindCoordinator brokerd/kafka/find_coordinator.py.

Authorization is Kafka's: Write on the TransactionalId for AddPartitionsToTxn (and
Write on each of its topics), AddOffsetsToTxn (and Read on the group) and EndTxn;
Describe on it for DescribeTransactions, and ListTransactions shows only the ids the
principal may describe. An AddPartitionsToTxn adds all its partitions or none, as in
Kafka: a partition refused (not authorized, or not in the metadata) gets its own error
and every other one OPERATION_NOT_ATTEMPTED, and the coordinator is not asked; one that
names no partition changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

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
from brokerd.kafka.request import KafkaHandler, KafkaRequest
from brokerd.kafka.transaction_errors import answered_code
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.producer_requests import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    end_transaction,
    running_transactions,
    unknown_partitions,
)
from spark_replica.errors import BrokerResponseError, OperationNotAttemptedError, code_of
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data

# The first version of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn that knows
# PRODUCER_FENCED.
FENCED_SINCE = 2
NO_START_TIME = -1


# -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ----------------------------------------


async def handle_add_partitions_to_txn(
    transactions: TransactionCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    transactional_id = body.v3_and_below_transactional_id
    asked = [
        TopicPartition(topic.name, index)
        for topic in body.v3_and_below_topics
        for index in topic.partitions
    ]
    if not asked:
        return Data(throttle_time_ms=0, results_by_topic_v3_and_below=[])
    errors = _refused_partitions(ctx, request, transactional_id, asked)
    if not errors:
        try:
            await add_partitions_to_txn(
                transactions,
                transactional_id,
                body.v3_and_below_producer_id,
                body.v3_and_below_producer_epoch,
                asked,
            )
            code = 0
        except BrokerResponseError as exc:
            code = answered_code(exc, request.version, FENCED_SINCE)
        errors = dict.fromkeys(asked, code)
    by_topic: dict[str, list[Data]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            Data(partition_index=tp.partition, partition_error_code=code)
        )
    return Data(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            Data(name=topic, results_by_partition=results) for topic, results in by_topic.items()
        ],
    )


def _refused_partitions(
    ctx: BrokerContext,
    request: KafkaRequest,
    transactional_id: str,
    asked: list[TopicPartition],
) -> dict[TopicPartition, int]:
    """Each partition's error if any of them is refused (the others not attempted),
    else nothing."""
    if not authorize_transactional_id(ctx, request, Operation.WRITE, transactional_id):
        denied = transactional_id_denied(request, Operation.WRITE, transactional_id)
        return dict.fromkeys(asked, denied.code)
    unknown = unknown_partitions(ctx, asked)
    refused: dict[TopicPartition, int] = {}
    for tp in asked:
        if not authorize_topic(ctx, request, Operation.WRITE, tp.topic):
            refused[tp] = topic_denied(request, Operation.WRITE, tp.topic).code
        elif tp in unknown:
            refused[tp] = unknown[tp].code
    if not refused:
        return {}
    return {tp: refused.get(tp, OperationNotAttemptedError.code) for tp in asked}


async def handle_add_offsets_to_txn(
    groups: GroupCoordinator | None,
    transactions: TransactionCoordinator | None,
    ctx: BrokerContext,
    request: KafkaRequest,
) -> Data:
    """The group's `__consumer_offsets` partition joins the transaction, so that its
    TxnOffsetCommit is committed or aborted with the records."""
    body = request.body
    transactional_id, group_id = body.transactional_id, body.group_id
    try:
        if not authorize_transactional_id(ctx, request, Operation.WRITE, transactional_id):
            raise transactional_id_denied(request, Operation.WRITE, transactional_id)
        if not authorize_group(ctx, request, Operation.READ, group_id):
            raise group_denied(request, Operation.READ, group_id)
        await add_offsets_to_txn(
            groups, transactions, transactional_id, body.producer_id, body.producer_epoch, group_id
        )
    except BrokerResponseError as exc:
        return Data(
            throttle_time_ms=0, error_code=answered_code(exc, request.version, FENCED_SINCE)
        )
    return Data(throttle_time_ms=0, error_code=0)


async def handle_end_txn(
    transactions: TransactionCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    transactional_id = body.transactional_id
    try:
        if not authorize_transactional_id(ctx, request, Operation.WRITE, transactional_id):
            raise transactional_id_denied(request, Operation.WRITE, transactional_id)
        await end_transaction(
            transactions, transactional_id, body.producer_id, body.producer_epoch, body.committed
        )
    except BrokerResponseError as exc:
        return Data(
            throttle_time_ms=0, error_code=answered_code(exc, request.version, FENCED_SINCE)
        )
    return Data(throttle_time_ms=0, error_code=0)


# -- DescribeTransactions, ListTransactions ---------------------------------------------


async def handle_describe_transactions(
    transactions: TransactionCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    return Data(
        throttle_time_ms=0,
        transaction_states=[
            _described(transactions, ctx, request, transactional_id)
            for transactional_id in request.body.transactional_ids
        ],
    )


def _described(
    transactions: TransactionCoordinator | None,
    ctx: BrokerContext,
    request: KafkaRequest,
    transactional_id: str,
) -> Data:
    answer = Data(
        error_code=0,
        transactional_id=transactional_id,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=NO_START_TIME,
        producer_id=-1,
        producer_epoch=-1,
        topic_partitions=[],
    )
    try:
        if not authorize_transactional_id(ctx, request, Operation.DESCRIBE, transactional_id):
            raise transactional_id_denied(request, Operation.DESCRIBE, transactional_id)
        described = running_transactions(transactions).describe_transaction(transactional_id)
    except BrokerResponseError as exc:
        answer.error_code = code_of(exc)
        return answer
    answer.transaction_state = described.state
    answer.transaction_timeout_ms = described.timeout_ms
    answer.transaction_start_time_ms = described.start_timestamp_ms
    answer.producer_id = described.producer_id
    answer.producer_epoch = described.producer_epoch
    answer.topic_partitions = [
        Data(name=topic, partition_indexes=indexes)
        for topic, indexes in described.partitions.items()
    ]
    return answer


async def handle_list_transactions(
    transactions: TransactionCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    answer = Data(throttle_time_ms=0, error_code=0, unknown_state_filters=[], transaction_states=[])
    try:
        listing = running_transactions(transactions).list_transactions(
            body.state_filters, body.producer_id_filters, body.duration_filter
        )
    except BrokerResponseError as exc:
        answer.error_code = code_of(exc)
        return answer
    answer.unknown_state_filters = listing.unknown_state_filters
    answer.transaction_states = [
        Data(
            transactional_id=listed.transactional_id,
            producer_id=listed.producer_id,
            transaction_state=listed.state,
        )
        for listed in listing.transactions
        if authorize_transactional_id(ctx, request, Operation.DESCRIBE, listed.transactional_id)
    ]
    return answer


# A transaction API's handler: the coordinator (None: this broker runs none), then as any.
TransactionHandler = Callable[
    [TransactionCoordinator | None, BrokerContext, KafkaRequest], Awaitable[Data]
]

_TRANSACTION_APIS: dict[int, TransactionHandler] = {
    24: handle_add_partitions_to_txn,
    26: handle_end_txn,
    65: handle_describe_transactions,
    66: handle_list_transactions,
}
ADD_OFFSETS_TO_TXN = 25


def transaction_handlers(
    groups: GroupCoordinator | None, transactions: TransactionCoordinator | None
) -> dict[int, KafkaHandler]:
    """The transaction APIs' handlers, bound to the broker's coordinators."""
    handlers: dict[int, KafkaHandler] = {
        key: partial(handler, transactions) for key, handler in _TRANSACTION_APIS.items()
    }
    handlers[ADD_OFFSETS_TO_TXN] = partial(handle_add_offsets_to_txn, groups, transactions)
    return handlers
