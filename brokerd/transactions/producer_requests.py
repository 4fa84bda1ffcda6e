"""A transactional producer's requests as both listeners serve them: InitProducerId with
a transactional id, FindCoordinator, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit, decided here once (and a Spark sink task's registration of its
participants, which only the replog listener serves) so that the Kafka and the replog
dialects differ only in how they decode the request and where their layouts put the
error.

Each function raises the BrokerResponseError that answers the request (or returns the
errors per partition where a request has one per partition); the dialects translate codes
an older version predates (brokerd/kafka/transaction_errors.py). Authorization is not
asked here: the Kafka listener asks resource by resource and places the refusal in its
layouts, the replog listener refuses a request whole from its table
(brokerd/native/authorization.py); both apply Kafka's rules, listed in
brokerd/core/authorization.py.

A broker without a coordinator (the Kafka listener is off, and with it the group and
transaction coordinators) answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from brokerd.coordination.internal_topic import TxnProducer
from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.decisions import ExpectedProducer, Reply
from brokerd.transactions.states import NO_PRODUCER_ID, Participant
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
)
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.wire.native.metadata import BrokerInfo

# FindCoordinator's key types, Kafka's numbers.
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def running_transactions(transactions: TransactionCoordinator | None) -> TransactionCoordinator:
    if transactions is None:
        raise CoordinatorNotAvailableError("this broker runs no transaction coordinator")
    return transactions


def running_groups(groups: GroupCoordinator | None) -> GroupCoordinator:
    if groups is None:
        raise CoordinatorNotAvailableError("this broker runs no group coordinator")
    return groups


def _raise_for(reply: Reply, what: str) -> None:
    if reply.error is not None:
        raise reply.error(what)


def find_coordinator(
    groups: GroupCoordinator | None,
    transactions: TransactionCoordinator | None,
    key: str,
    key_type: int,
) -> BrokerInfo:
    """The broker coordinating a group (the leader of its `__consumer_offsets`
    partition) or a transactional id (of its `__transaction_state` partition)."""
    if key_type == GROUP_KEY_TYPE:
        return running_groups(groups).coordinator(key)
    if key_type == TRANSACTION_KEY_TYPE:
        return running_transactions(transactions).coordinator_of(key)
    raise InvalidRequestError(
        f"coordinator key type {key_type}: use {GROUP_KEY_TYPE} (group) "
        f"or {TRANSACTION_KEY_TYPE} (transaction)"
    )


async def init_transactional_producer(
    transactions: TransactionCoordinator | None,
    transactional_id: str,
    timeout_ms: int,
    producer_id: int,
    producer_epoch: int,
) -> tuple[int, int]:
    """The id's producer id and bumped epoch, which fences the previous producer of the
    id and aborts its open transaction. (-1, -1) asks as a new producer; a producer's
    own id and epoch ask for its epoch to be bumped (KIP-360)."""
    expected = None
    if producer_id != NO_PRODUCER_ID:
        expected = ExpectedProducer(producer_id, producer_epoch)
    reply = await running_transactions(transactions).init_producer_id(
        transactional_id, timeout_ms, expected
    )
    _raise_for(reply, f"InitProducerId for transactional id {transactional_id!r}")
    return reply.producer_id, reply.producer_epoch


def unknown_partitions(
    ctx: BrokerContext, asked: list[TopicPartition]
) -> dict[TopicPartition, BrokerResponseError]:
    """The partitions of an AddPartitionsToTxn the cluster does not have."""
    return {
        tp: UnknownTopicOrPartitionError(f"{tp} does not exist")
        for tp in asked
        if tp not in ctx.metadata.partitions
    }


async def add_partitions_to_txn(
    transactions: TransactionCoordinator | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    asked: list[TopicPartition],
) -> None:
    """Add the partitions to the producer's transaction (opening it if none is open).
    The caller has refused the request if any partition is unknown or not writable:
    Kafka adds all of a request's partitions or none."""
    if not asked:
        return
    reply = await running_transactions(transactions).add_partitions(
        transactional_id, producer_id, producer_epoch, asked
    )
    _raise_for(reply, f"transactional id {transactional_id!r}")


async def add_offsets_to_txn(
    groups: GroupCoordinator | None,
    transactions: TransactionCoordinator | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
) -> None:
    """The group's `__consumer_offsets` partition joins the transaction, so that its
    TxnOffsetCommit is committed or aborted with the records."""
    offsets = TopicPartition(OFFSETS_TOPIC, running_groups(groups).offsets_partition(group_id))
    await add_partitions_to_txn(
        transactions, transactional_id, producer_id, producer_epoch, [offsets]
    )


async def end_transaction(
    transactions: TransactionCoordinator | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
) -> None:
    """Commit or abort the open transaction: the coordinator writes the markers."""
    reply = await running_transactions(transactions).end_transaction(
        transactional_id, producer_id, producer_epoch, committed
    )
    _raise_for(reply, f"transactional id {transactional_id!r}")


async def register_sink_participants(
    transactions: TransactionCoordinator | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    micro_batch: int,
    participants: Iterable[Participant],
) -> bool:
    """A Spark sink task's producers join its micro-batch's transaction under the
    driver's id, producer id and epoch; True if the micro-batch was committed before (the
    task writes nothing). The caller has refused the request if a partition is unknown."""
    reply = await running_transactions(transactions).register_participants(
        transactional_id, producer_id, producer_epoch, micro_batch, participants
    )
    _raise_for(reply, f"micro-batch {micro_batch} of transactional id {transactional_id!r}")
    return reply.already_committed


def offset_refused(
    ctx: BrokerContext, tp: TopicPartition, metadata: str
) -> BrokerResponseError | None:
    """Why one offset of a TxnOffsetCommit is refused before the group is asked: a
    partition the cluster does not have, or metadata over offset.metadata.max.bytes."""
    if tp not in ctx.metadata.partitions:
        return UnknownTopicOrPartitionError(f"{tp} does not exist")
    max_metadata = ctx.config.offset_metadata_max_bytes
    if len(metadata.encode("utf-8", "surrogateescape")) > max_metadata:
        return OffsetMetadataTooLargeError(
            f"metadata over offset.metadata.max.bytes={max_metadata}"
        )
    return None


async def commit_offsets_in_transaction(
    groups: GroupCoordinator | None,
    group_id: str,
    producer: TxnProducer,
    member_id: str,
    generation_id: int,
    group_instance_id: str | None,
    commits: Mapping[TopicPartition, OffsetValue],
) -> None:
    """Store the offsets as the producer's transactional records, pending until the
    transaction's marker; the group's or the append's error for all of them."""
    await running_groups(groups).commit_in_transaction(
        group_id, producer, member_id, generation_id, group_instance_id, commits
    )
