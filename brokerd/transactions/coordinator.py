"""The transaction coordinator as the listeners see it: a transactional producer's
requests decided (brokerd.transactions.decisions) on the id's entry and stored
(brokerd.transactions.state_manager), and where each transactional id is coordinated.

Dialect-free: each request answers a decision's `Reply`, or raises the coordinator
error that stands in for one (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, or what a failed store says); the dialects put it where
their layouts have room for it and translate codes that older versions predate.

A new transactional id, or one whose epoch ran out, needs a fresh producer id, which
the broker's allocator (brokerd.core.producer_ids) may claim from ZooKeeper: it is taken
before deciding, and the entry read again after, since a request for the same id may
have been stored meanwhile. An id taken and not used is skipped, never reused, as every
id a broker claims and does not hand out.

The `__transaction_state` topic is created on the first FindCoordinator that needs it,
as Kafka's brokers do; until its leaders are elected the answer is
COORDINATOR_NOT_AVAILABLE, which clients retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable

from brokerd.coordination.internal_topic import ensure_topic
from brokerd.core.context import BrokerContext
from brokerd.transactions.decisions import (
    Decision,
    ExpectedProducer,
    Reply,
    add_partitions,
    end_transaction,
    init_producer_id,
    register_participants,
)
from brokerd.transactions.state_manager import TransactionStateManager
from brokerd.transactions.states import Participant, TransactionEntry, is_epoch_exhausted
from brokerd.transactions.views import (
    NO_DURATION_FILTER,
    DescribedTransaction,
    TransactionListing,
    describe_transaction,
    list_transactions,
)
from spark_replica.errors import CoordinatorNotAvailableError, InvalidRequestError
from spark_replica.topics import TRANSACTION_STATE_TOPIC, TopicPartition
from spark_replica.wire.native.metadata import BrokerInfo

# A fresh producer id (no epoch bumped): the broker's allocator.
AllocateProducerId = Callable[[], Awaitable[int]]


class TransactionCoordinator:
    """Owned by the event loop, as the state manager it drives."""

    def __init__(
        self,
        ctx: BrokerContext,
        state: TransactionStateManager,
        allocate_producer_id: AllocateProducerId,
        clock: Callable[[], int],
    ) -> None:
        self.ctx = ctx
        self.state = state
        self._allocate_producer_id = allocate_producer_id
        self._clock = clock
        self._creating: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.ctx.role_listeners.append(self.state.follow_roles)
        self.state.start()

    async def stop(self) -> None:
        if self.state.follow_roles in self.ctx.role_listeners:
            self.ctx.role_listeners.remove(self.state.follow_roles)
        if self._creating is not None:
            self._creating.cancel()
            await asyncio.gather(self._creating, return_exceptions=True)
        await self.state.stop()

    def coordinator_of(self, transactional_id: str) -> BrokerInfo:
        """The broker coordinating the id: the leader of its `__transaction_state`
        partition by the controller's metadata, the topic created if it is not there."""
        if self.ctx.registration is None:
            raise CoordinatorNotAvailableError("the transaction coordinator is not running yet")
        if self.state.topic.partition_count(self.ctx) == 0:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.create_task(
                    ensure_topic(self.ctx, self.state.topic), name="transaction-state-create"
                )
            raise CoordinatorNotAvailableError(f"{TRANSACTION_STATE_TOPIC} is being created; retry")
        index = self.state.partition_for(transactional_id)
        leader_state = self.ctx.metadata.partitions.get(self.state.topic.partition(index))
        broker = (
            None if leader_state is None else self.ctx.metadata.brokers.get(leader_state.leader)
        )
        if broker is None or broker.kafka_port < 0:
            raise CoordinatorNotAvailableError(
                f"{TRANSACTION_STATE_TOPIC}-{index}, which holds transactional id "
                f"{transactional_id!r}, has no live leader"
            )
        return broker

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: ExpectedProducer | None
    ) -> Reply:
        """InitProducerId with a transactional id: the producer id and bumped epoch, the
        previous producer fenced (and its open transaction aborted)."""
        if not transactional_id:
            return Reply(InvalidRequestError)
        fresh: int | None = None
        if _needs_new_producer_id(self.state.entry(transactional_id)):
            fresh = await self._allocate_producer_id()

        def allocate() -> int:
            if fresh is None:
                raise CoordinatorNotAvailableError(
                    f"{transactional_id!r} changed while its producer id was allocated; retry"
                )
            return fresh

        max_timeout_ms = self.ctx.config.transactions.max_timeout_ms
        return await self._decide(
            transactional_id,
            lambda entry, now: init_producer_id(
                entry,
                transactional_id,
                timeout_ms,
                expected,
                now,
                max_timeout_ms=max_timeout_ms,
                allocate_producer_id=allocate,
            ),
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> Reply:
        """AddPartitionsToTxn, and AddOffsetsToTxn with the group's offsets partition."""
        added = frozenset(partitions)
        return await self._decide(
            transactional_id,
            lambda entry, now: add_partitions(entry, producer_id, producer_epoch, added, now),
        )

    async def register_participants(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        micro_batch: int,
        participants: Iterable[Participant],
    ) -> Reply:
        """A Spark sink task's producers joining micro-batch `micro_batch`'s transaction
        under the driver's id, producer id and epoch (decisions.py, rules 6 to 9). A reply
        `already_committed` tells the task to write nothing: the micro-batch committed."""
        joining = frozenset(participants)
        return await self._decide(
            transactional_id,
            lambda entry, now: register_participants(
                entry, producer_id, producer_epoch, micro_batch, joining, now
            ),
        )

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Reply:
        return await self._decide(
            transactional_id,
            lambda entry, now: end_transaction(entry, producer_id, producer_epoch, commit, now),
        )

    def list_transactions(
        self,
        states: Collection[str],
        producer_ids: Collection[int],
        min_duration_ms: int = NO_DURATION_FILTER,
    ) -> TransactionListing:
        """The ids of every partition coordinated (and loaded) here."""
        return list_transactions(
            self.state.entries(), states, producer_ids, self._clock(), min_duration_ms
        )

    def describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        return describe_transaction(transactional_id, self.state.entry(transactional_id))

    async def _decide(
        self,
        transactional_id: str,
        decide: Callable[[TransactionEntry | None, int], Decision],
    ) -> Reply:
        decision = decide(self.state.entry(transactional_id), self._clock())
        if isinstance(decision, Reply):
            return decision
        await self.state.store(decision)
        return decision.reply


def _needs_new_producer_id(entry: TransactionEntry | None) -> bool:
    return entry is None or is_epoch_exhausted(entry.metadata.producer_epoch)
