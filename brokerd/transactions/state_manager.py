"""The transaction coordinator's state: every transactional id of the `__transaction_state`
partitions this broker leads, stored and loaded (Kafka's TransactionStateManager).

Owned by the event loop. Per led partition, a load (brokerd.coordination.partition_loads)
replays the partition into a StoredTransactions whose entries are the ids' live state
from then on; until it is ready its ids answer COORDINATOR_LOAD_IN_PROGRESS, and ids of
partitions led elsewhere answer NOT_COORDINATOR. The coordinator epoch of a load is the
partition's leader epoch when it was loaded: the partition leaders that take its markers
refuse an older one, so a deposed coordinator cannot end a transaction its successor
owns.

`store` runs a decision's Store (brokerd.transactions.decisions): the entry is held
pending while the record is appended with acks=all, then becomes the target (or goes
back, on failure, and the append's error is raised). A stored PrepareCommit or
PrepareAbort goes on, beside the reply, to its markers and then to CompleteCommit or
CompleteAbort (`_finish`); a load does the same for every transaction it finds prepared
and not completed, since its markers may not all have been written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from brokerd.config.broker import BrokerConfig
from brokerd.coordination.internal_topic import InternalTopic
from brokerd.coordination.partition_loads import Load, PartitionLoads
from brokerd.core.context import BrokerContext
from brokerd.transactions.decisions import (
    Store,
    abort_timed_out,
    complete,
    expire,
    in_flight,
    store_failed,
    stored,
)
from brokerd.transactions.markers import (
    MARKER_RETRY_BACKOFF_S,
    NO_LEADER,
    WriteMarkers,
    markers_of,
    write_markers,
)
from brokerd.transactions.states import TransactionEntry, TransactionMetadata, TxnState
from brokerd.transactions.stored_transactions import StoredTransactions, record_of
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    ReplogError,
    UnknownServerError,
)
from spark_replica.topics import TRANSACTION_STATE_TOPIC, TopicPartition, transaction_partition_for

logger = logging.getLogger("brokerd.transactions")
# How long an append of a transaction's state waits for the in-sync copies: Kafka's
# coordinator waits request.timeout.ms, whose default this is.
APPEND_TIMEOUT_MS = 30_000


def transaction_state_topic(config: BrokerConfig) -> InternalTopic:
    settings = config.transactions
    return InternalTopic(
        name=TRANSACTION_STATE_TOPIC,
        num_partitions=settings.state_log_num_partitions,
        replication_factor=settings.state_log_replication_factor,
        segment_bytes=settings.state_log_segment_bytes,
        append_timeout_ms=APPEND_TIMEOUT_MS,
        load_buffer_size=settings.state_log_load_buffer_size,
        too_large=UnknownServerError,  # as Kafka answers: one id's record is never that large
        min_insync_replicas=settings.state_log_min_isr,
    )


class TransactionStateManager:
    def __init__(
        self, ctx: BrokerContext, append_markers: WriteMarkers, clock: Callable[[], int]
    ) -> None:
        """`append_markers` appends one partition's markers at its leader; `clock` is the wall
        time in ms that the stored timestamps use."""
        self.ctx = ctx
        self.topic = transaction_state_topic(ctx.config)
        self._append_markers = append_markers
        self._clock = clock
        self._loads: PartitionLoads[StoredTransactions] = PartitionLoads(
            ctx, self.topic, StoredTransactions, self._on_ready, self._on_dropped
        )
        self._coordinator_epochs: dict[int, int] = {}
        self._finishing: set[asyncio.Task[None]] = set()
        self._sweeps: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Sweep the loaded ids now and then: abort the transactions past their timeout
        (every transaction.abort.timed.out.transaction.cleanup.interval.ms) and expire
        the ids idle for transactional.id.expiration.ms (every
        transaction.remove.expired.transaction.cleanup.interval.ms)."""
        settings = self.ctx.config.transactions
        self._sweeps = [
            asyncio.create_task(
                self._every(settings.abort_timed_out_interval_ms, self.abort_timed_out),
                name="transactions-abort-timed-out",
            ),
            asyncio.create_task(
                self._every(settings.remove_expired_interval_ms, self.expire_idle),
                name="transactions-expire-ids",
            ),
        ]

    def follow_roles(self) -> None:
        """Load the partitions newly led here, drop those no longer (after each
        controller request)."""
        self._loads.follow_all()

    async def stop(self) -> None:
        tasks = [*self._sweeps, *self._finishing]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._loads.stop()

    async def abort_timed_out(self) -> int:
        """Abort, fencing their producers, the transactions past their timeout; how many."""
        now = self._clock()
        return await self._sweep(lambda entry: abort_timed_out(entry, now), "aborting")

    async def expire_idle(self) -> int:
        """Tombstone the ids idle for transactional.id.expiration.ms; how many."""
        now = self._clock()
        expiration_ms = self.ctx.config.transactions.transactional_id_expiration_ms
        return await self._sweep(lambda entry: expire(entry, now, expiration_ms), "expiring")

    def partition_for(self, transactional_id: str) -> int:
        count = self.topic.partition_count(self.ctx)
        if count == 0:
            raise CoordinatorNotAvailableError(f"{TRANSACTION_STATE_TOPIC} does not exist yet")
        return transaction_partition_for(transactional_id, count)

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self._coordinator_epochs[self._place(transactional_id).index]

    def entry(self, transactional_id: str) -> TransactionEntry | None:
        """The id's state if this broker coordinates it now (None: an id not seen)."""
        return self._place(transactional_id).stored.entries.get(transactional_id)

    def entries(self) -> list[TransactionEntry]:
        """Every id of the loaded partitions (ListTransactions, timeouts, expiry)."""
        return [entry for load in self._loads.ready() for entry in load.stored.entries.values()]

    async def store(self, store: Store) -> None:
        """Append `store`'s target and hold it; raise the coordinator error that the
        append's failure stands for, leaving the entry as `store_failed` says."""
        transactional_id = store.target.transactional_id
        load = self._place(transactional_id)
        entries = load.stored.entries
        entries[transactional_id] = in_flight(store)
        try:
            await load.appends.append([record_of(store.target)])
        except BrokerResponseError as exc:
            if self._loads.get(load.index) is load:
                entries[transactional_id] = store_failed(store)
                if isinstance(exc, NotCoordinatorError):
                    self._loads.lost(load)
            raise
        if self._loads.get(load.index) is not load:
            raise NotCoordinatorError(f"{self.topic.name}-{load.index} moved while storing")
        after = stored(store)
        if after is None:
            del entries[transactional_id]
            return
        entries[transactional_id] = after
        if store.writes_markers:
            self._start_finish(load, transactional_id)

    async def _sweep(self, decide: Callable[[TransactionEntry], Store | None], doing: str) -> int:
        """Store what `decide` says for each loaded id, one at a time, each decided on the
        id's entry as it is then (an earlier store of the sweep may have waited)."""
        done = 0
        for metadata in [entry.metadata for entry in self.entries()]:
            try:
                entry = self.entry(metadata.transactional_id)
                store = None if entry is None else decide(entry)
                if store is None:
                    continue
                await self.store(store)
                done += 1
            except BrokerResponseError as exc:
                logger.info("%s %s failed: %s", doing, _named(metadata), exc)
        return done

    async def _every(self, interval_ms: int, sweep: Callable[[], Awaitable[int]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await sweep()

    def _place(self, transactional_id: str) -> Load[StoredTransactions]:
        index = self.partition_for(transactional_id)
        load = self._loads.follow(index)
        if load is None:
            raise NotCoordinatorError(
                f"this broker does not lead {self.topic.name}-{index}, "
                f"which holds transactional id {transactional_id!r}"
            )
        if not load.ready:
            raise CoordinatorLoadInProgressError(
                f"{self.topic.name}-{index}, which holds {transactional_id!r}, is loading"
            )
        return load

    def _on_ready(self, load: Load[StoredTransactions]) -> None:
        partition = self.ctx.replicas.partitions[self.topic.partition(load.index)]
        self._coordinator_epochs[load.index] = partition.leader_epoch
        for entry in load.stored.unfinished():
            self._start_finish(load, entry.metadata.transactional_id)

    def _on_dropped(self, index: int) -> None:
        self._coordinator_epochs.pop(index, None)

    def _start_finish(self, load: Load[StoredTransactions], transactional_id: str) -> None:
        task = asyncio.create_task(
            self._finish(load, transactional_id), name=f"txn-markers-{transactional_id}"
        )
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    async def _finish(self, load: Load[StoredTransactions], transactional_id: str) -> None:
        """Write the prepared transaction's markers, then store it completed. Requests
        meanwhile answer CONCURRENT_TRANSACTIONS (the entry is pending), as in Kafka. A
        leader refusing a marker for good (a bug, never a leader change) is logged and
        the transaction left prepared, for the next load to try again."""
        if self._loads.get(load.index) is not load:
            return
        entries = load.stored.entries
        entry = entries[transactional_id]
        metadata = entry.metadata
        done = (
            TxnState.COMPLETE_COMMIT
            if metadata.state is TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        entries[transactional_id] = replace(entry, pending=done)
        try:
            written = await write_markers(
                markers_of(metadata, self._coordinator_epochs[load.index]),
                self._append_markers,
                self._leader_of,
                lambda: self._loads.get(load.index) is load,
            )
        except ReplogError as exc:
            logger.error("the markers of %s could not be written: %s", _named(metadata), exc)
            written = False
        if self._loads.get(load.index) is not load:
            return
        entries[transactional_id] = entry
        if not written:
            logger.info("%s left prepared for the next load to finish", _named(metadata))
            return
        while self._loads.get(load.index) is load:
            try:
                await self.store(complete(entries[transactional_id], self._clock()))
                return
            except CoordinatorNotAvailableError as exc:
                logger.warning("storing %s completed failed; retrying: %s", transactional_id, exc)
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)
            except NotCoordinatorError:
                return

    def _leader_of(self, tp: TopicPartition) -> int | None:
        state = self.ctx.metadata.partitions.get(tp)
        if state is None:
            return None if not self.ctx.metadata.partitions_of(tp.topic) else NO_LEADER
        return state.leader


def _named(metadata: TransactionMetadata) -> str:
    return f"transactional id {metadata.transactional_id!r} (producer {metadata.producer_id})"
