"""Kafka's transactional producer on replog's protocol: records to several partitions, and
a consumer group's offsets, made visible to read_committed readers all together or not
at all.

    producer = TransactionalProducer(cluster, ProducerConfig(transactional_id="orders"))
    await producer.init_transactions()
    producer.begin_transaction()
    await producer.send("out", b"value")
    await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42}, "group")
    await producer.commit_transaction()

It is a Producer whose batches carry the transactional flag and the id, under the
producer id and epoch that init_transactions got from the id's transaction coordinator
(which fenced any earlier producer of the id). Before the first record of a transaction
joins a partition, the partition is added to the transaction (AddPartitionsToTxn; the
partitions several concurrent sends name meanwhile go in one request), so the
coordinator knows where to write the markers. commit_transaction flushes first, and
commits only if every record of the transaction was written.

The rules for errors are Kafka's, kept in transaction_state.py: fenced is fatal
(ProducerFencedError from every call), a failure inside a transaction is abortable
(TransactionAbortableError until abort_transaction). Requests to a coordinator go through
CoordinatorCalls (coordinator_calls.py), which finds it and retries them until
`max_block_ms` (Kafka's bound on these calls) has passed.

Ownership: like the Producer, it lives on one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from spark_replica.errors import (
    ConfigError,
    ReplogError,
)
from spark_replica.topics import TopicPartition
from spark_replica.transport import Buffer
from spark_replica.wire.native.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    TxnTopic,
)
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.find_coordinator import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
)
from spark_replica.wire.native.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
)
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffset,
    TxnOffsetCommitRequest,
    TxnOffsetTopic,
)

from .cluster import Cluster
from .coordinator_calls import CoordinatorCalls
from .partition_sender import ProducerBatch
from .producer import Producer
from .producer_config import ProducerConfig
from .transaction_state import TransactionState


class _TransactionalIdentity:
    """The partition senders' identity source: the one init_transactions got. A sender
    never asks for another epoch on its own, which would leave the transaction."""

    def __init__(self, producer: TransactionalProducer) -> None:
        self._producer = producer

    async def shared(self) -> tuple[int, int]:
        identity = self._producer.identity
        if identity is None:
            raise ConfigError("call init_transactions before sending")
        return identity

    async def replacement(self, current: tuple[int, int]) -> tuple[int, int]:
        raise ConfigError(
            f"producer {current}: a transactional producer keeps the identity its "
            "coordinator gave; abort the transaction"
        )


class TransactionalProducer(Producer):
    """A Producer whose records are written in transactions; see the module's docstring."""

    def __init__(self, cluster: Cluster, config: ProducerConfig) -> None:
        if config.transactional_id is None:
            raise ConfigError("a TransactionalProducer needs a transactional_id in its config")
        super().__init__(cluster, config)
        self.transactional_id: str = config.transactional_id
        self.state = TransactionState(self.transactional_id)
        self.identity: tuple[int, int] | None = None
        self._identities = _TransactionalIdentity(self)
        self._partition_gate = self._join
        # Partitions of the open transaction: added, and asked for but not yet added.
        self._added: set[TopicPartition] = set()
        self._pending: set[TopicPartition] = set()
        self._adding: asyncio.Task[None] | None = None
        self._has_offsets = False
        self._calls = CoordinatorCalls(cluster, config)

    # ------------------------------------------------------------------ transactions

    async def init_transactions(self) -> None:
        """Get the id's producer id and a new epoch from its coordinator: any earlier
        producer with this transactional id is fenced, and its open transaction aborted."""
        self.state.begin_init()
        request = InitProducerIdRequest(
            self.transactional_id,
            self.config.transaction_timeout_ms,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
        )
        try:
            response = await self._to_coordinator(request, TRANSACTION_KEY_TYPE)
        except ReplogError as exc:
            raise self.state.failed(exc) from None
        self.identity = (response.producer_id, response.producer_epoch)
        self.state.completed()

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent from now on belong to it."""
        self.state.begin_transaction()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_id: str
    ) -> None:
        """Commit the group's `offsets` (the next record to read, per partition) with the
        transaction: they become the group's committed offsets if it commits, and are
        dropped if it aborts."""
        self.state.check_sending("send_offsets_to_transaction")
        producer_id, epoch = self._current_identity()
        try:
            await self._to_coordinator(
                AddOffsetsToTxnRequest(self.transactional_id, producer_id, epoch, group_id),
                TRANSACTION_KEY_TYPE,
            )
            self._has_offsets = True
            by_topic: dict[str, list[TxnOffset]] = {}
            for tp, offset in offsets.items():
                by_topic.setdefault(tp.topic, []).append(TxnOffset(tp.partition, offset))
            request = TxnOffsetCommitRequest(
                self.transactional_id,
                group_id,
                producer_id,
                epoch,
                [TxnOffsetTopic(topic, entries) for topic, entries in by_topic.items()],
            )
            await self._to_coordinator(request, GROUP_KEY_TYPE, group_id)
        except ReplogError as exc:
            raise self.state.failed(exc) from None

    async def commit_transaction(self) -> None:
        """Flush, then commit: every record and offset of the transaction becomes
        visible to read_committed readers at once. If a record could not be written the
        transaction is not committed: TransactionAbortableError (abort it)."""
        self.state.begin_commit()
        await self.flush()
        self.state.raise_if_failed("commit_transaction")
        await self._end(committed=True)

    async def abort_transaction(self) -> None:
        """Abort: the records sent in the transaction stay invisible to read_committed
        readers, and its offsets are not committed. Records still being sent are
        answered first."""
        self.state.begin_abort()
        await self.flush()
        await self._end(committed=False)

    async def _end(self, committed: bool) -> None:
        if self._added or self._has_offsets:
            producer_id, epoch = self._current_identity()
            request = EndTxnRequest(self.transactional_id, producer_id, epoch, committed)
            try:
                await self._to_coordinator(request, TRANSACTION_KEY_TYPE)
            except ReplogError as exc:
                raise self.state.failed(exc) from None
        self._added.clear()
        self._pending.clear()
        self._has_offsets = False
        self.state.completed()

    def _current_identity(self) -> tuple[int, int]:
        assert self.identity is not None, "the state machine allows no call before init"
        return self.identity

    # ------------------------------------------------------------------ records

    async def _join(self, tp: TopicPartition) -> None:
        """Add `tp` to the open transaction unless it is in already; the partitions
        asked for while an AddPartitionsToTxn is out go together in the next one."""
        self.state.check_sending("send")
        while tp not in self._added:
            self._pending.add(tp)
            if self._adding is None or self._adding.done():
                self._adding = asyncio.ensure_future(self._add_pending())
            adding = self._adding
            await asyncio.shield(adding)
            self.state.check_sending("send")

    async def _add_pending(self) -> None:
        partitions = sorted(self._pending - self._added)
        self._pending.clear()
        if not partitions:
            return
        producer_id, epoch = self._current_identity()
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            self.transactional_id,
            producer_id,
            epoch,
            [TxnTopic(topic, indexes) for topic, indexes in by_topic.items()],
        )
        try:
            await self._to_coordinator(request, TRANSACTION_KEY_TYPE)
        except ReplogError as exc:
            raise self.state.failed(exc) from None
        self._added.update(partitions)

    def _finished(self, batch: ProducerBatch, result: asyncio.Future[int]) -> None:
        """A record that could not be written makes the transaction abortable."""
        error = None if result.cancelled() else result.exception()
        if error is not None:
            self.state.failed(error)
        super()._finished(batch, result)

    async def send_arrow(
        self, topic: str, partition: int, records: pa.RecordBatch | pa.Table
    ) -> int:
        await self._join(TopicPartition(topic, partition))
        return await super().send_arrow(topic, partition, records)

    async def send_batch(self, topic: str, partition: int, batch: Buffer) -> int:
        raise ConfigError(
            "a transactional producer encodes its own batches (they carry its flag and "
            "identity): use send, send_records or send_arrow"
        )

    # ------------------------------------------------------------------ coordinators

    async def _to_coordinator(self, request: Any, key_type: int, key: str | None = None) -> Any:
        """Send `request` to the coordinator of the transactional id (or of group `key`)."""
        return await self._calls.send(
            request, key_type, self.transactional_id if key is None else key
        )
