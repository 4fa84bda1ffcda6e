"""The coordinator requests of a transactional stream write (`transactional=true`): one
transaction per micro-batch under the query's transactional id, written by many tasks.

- The driver, when Spark builds the micro-batch's writer, asks InitProducerId for the id
  (`begin_driver_epoch`): the epoch is bumped, which fences every task of an earlier
  driver epoch and aborts the transaction a dead driver or a failed micro-batch left
  open. The (producer id, epoch) travels to the tasks inside the pickled writer.
- Each task, before its first batch to a partition, registers its producer (its derived
  identity, sink_identity) on that partition (`TaskRegistration`, RegisterSinkParticipants).
  The coordinator answers `already_committed` when the micro-batch committed before (the
  driver crashed between EndTxn and Spark's commit log): the task then writes nothing.
- The driver's commit of the micro-batch is EndTxn(commit), its abort EndTxn(abort)
  (`end_micro_batch`); the coordinator writes every participant's marker.

Every request goes through the client's SinkTransactionCalls: retried on the
coordinator's retriable errors (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS while the
previous micro-batch's markers are written, ...) until `max.block.ms`. Fenced
(PRODUCER_FENCED: a newer driver epoch) and INVALID_TXN_STATE (a zombie task of a
finished micro-batch) are raised, typed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from connectors.spark.sink_identity import DriverEpoch, ProducerIdentity
from connectors.spark.sink_options import SinkOptions
from spark_replica.client import (
    Cluster,
    ProducerConfig,
    SinkParticipant,
    SinkTransactionCalls,
    parse_bootstrap,
)
from spark_replica.topics import TopicPartition

CLIENT_ID = "replog-spark-sink"


@dataclass(frozen=True, slots=True)
class SinkTransaction:
    """What a task needs of its micro-batch's transaction: the id and the driver's epoch."""

    transactional_id: str
    driver: DriverEpoch


def _coordinator_config(options: SinkOptions, transactional_id: str) -> ProducerConfig:
    settings = options.producer
    return ProducerConfig(
        transactional_id=transactional_id,
        request_timeout_ms=settings.request_timeout_ms,
        retry_backoff_ms=settings.retry_backoff_ms,
        max_block_ms=settings.delivery_timeout_ms,
        transaction_timeout_ms=settings.transaction_timeout_ms,
    )


def _cluster(options: SinkOptions) -> Cluster:
    return Cluster(parse_bootstrap(options.servers), client_id=CLIENT_ID, security=options.security)


def begin_driver_epoch(options: SinkOptions, transactional_id: str) -> SinkTransaction:
    """InitProducerId for the query's id on the driver: a new epoch, which fences the
    tasks of every earlier one and aborts the transaction left open."""

    async def init() -> SinkTransaction:
        cluster = _cluster(options)
        try:
            calls = SinkTransactionCalls(cluster, _coordinator_config(options, transactional_id))
            producer_id, epoch = await calls.begin_driver_epoch()
        finally:
            await cluster.close()
        return SinkTransaction(transactional_id, DriverEpoch(producer_id, epoch))

    return asyncio.run(init())


def end_micro_batch(options: SinkOptions, transaction: SinkTransaction, commit: bool) -> None:
    """EndTxn: commit (or abort) the micro-batch's transaction; the coordinator writes
    each participant's marker. A repeat of an EndTxn that completed is answered OK."""

    async def end() -> None:
        cluster = _cluster(options)
        try:
            driver = transaction.driver
            calls = SinkTransactionCalls(
                cluster, _coordinator_config(options, transaction.transactional_id)
            )
            await calls.end(driver.producer_id, driver.epoch, commit)
        finally:
            await cluster.close()

    asyncio.run(end())


class TaskRegistration:
    """A task's registrations, on the task's event loop and cluster: each partition
    once, and the partitions asked for while a registration is out go together in the
    next one (the coordinator stores each registration that adds participants, and
    answers others of the id CONCURRENT_TRANSACTIONS meanwhile: fewer is faster)."""

    def __init__(
        self,
        cluster: Cluster,
        options: SinkOptions,
        transaction: SinkTransaction,
        identity: ProducerIdentity,
    ) -> None:
        self.transaction = transaction
        self.identity = identity
        self.already_committed = False
        self._calls = SinkTransactionCalls(
            cluster, _coordinator_config(options, transaction.transactional_id)
        )
        self._registered: set[TopicPartition] = set()
        self._pending: set[TopicPartition] = set()
        self._registering: asyncio.Future[None] | None = None

    async def register(self, tp: TopicPartition) -> bool:
        """Join the micro-batch's transaction on `tp`; True if the micro-batch was
        committed before, and nothing is to be written."""
        while tp not in self._registered and not self.already_committed:
            self._pending.add(tp)
            if self._registering is None or self._registering.done():
                self._registering = asyncio.ensure_future(self._register_pending())
            await asyncio.shield(self._registering)
        return self.already_committed

    async def _register_pending(self) -> None:
        partitions = sorted(self._pending - self._registered)
        self._pending.clear()
        if not partitions:
            return
        transaction, identity = self.transaction, self.identity
        self.already_committed = await self._calls.register(
            transaction.driver.producer_id,
            transaction.driver.epoch,
            identity.micro_batch,
            [SinkParticipant(tp, identity.producer_id, identity.epoch) for tp in partitions],
        )
        self._registered.update(partitions)
