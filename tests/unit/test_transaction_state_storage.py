"""The transaction coordinator's state stored in and loaded from `__transaction_state`: real
partitions on real log files (a broker's ReplicaManager on a temporary directory, this
broker the only replica), no processes. Markers go to a recording fake of the partition
leaders' append, the interface the log side provides.

A restart is a second ReplicaManager on the same directory: what it loads is what the
first one's appends left in the files.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.coordination import internal_topic
from brokerd.core.context import BrokerContext
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.decisions import (
    ALREADY_COMMITTED,
    Reply,
    Store,
    add_partitions,
    end_transaction,
    init_producer_id,
    register_participants,
)
from brokerd.transactions.markers import Marker
from brokerd.transactions.state_manager import TransactionStateManager
from brokerd.transactions.states import (
    Participant,
    TransactionEntry,
    TransactionMetadata,
    TxnState,
)
from brokerd.transactions.stored_transactions import record_of
from spark_replica.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
)
from spark_replica.records import DERIVED_PRODUCER_ID_BASE
from spark_replica.topics import TRANSACTION_STATE_TOPIC, TopicPartition, transaction_partition_for
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    PartitionLeaderState,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo

PARTITIONS = 3
TX = "tx-orders"
INDEX = transaction_partition_for(TX, PARTITIONS)
OUT = [TopicPartition("out", 0), TopicPartition("out", 1)]
# Far beyond how long any step here takes: a test that waits this long has failed.
DEADLINE_S = 30.0
T = TypeVar("T")


@dataclass
class Leaders:
    """The partition leaders' marker append, recorded; fails `fail` times first with a
    leader that moved, as a leader change does."""

    written: list[tuple[TopicPartition, int, int, int, bool]] = field(default_factory=list)
    fail: int = 0
    refuse: Exception | None = None  # raised by every append, if set

    async def write(self, tp: TopicPartition, markers: Sequence[Marker]) -> None:
        if self.refuse is not None:
            raise self.refuse
        if self.fail:
            self.fail -= 1
            raise NotLeaderOrFollowerError(f"{tp} moved")
        for m in markers:
            self.written.append(
                (tp, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.committed)
            )


class Broker:
    """Broker 1's replicas of the transaction state topic on `log_dir`, led here."""

    def __init__(
        self,
        log_dir: Path,
        leaders: Leaders,
        leader_epoch: int = 5,
        topic_configs: dict[str, str] | None = None,
        replicas: tuple[int, ...] = (1,),
        overrides: dict[str, str] | None = None,
    ) -> None:
        config = BrokerConfig(1, log_dir, "h:1").with_overrides(
            {
                "transaction.state.log.num.partitions": str(PARTITIONS),
                "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1",
                **(overrides or {}),
            }
        )
        self.ctx = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
        self.states = []
        for index in range(PARTITIONS):
            tp = TopicPartition(TRANSACTION_STATE_TOPIC, index)
            partition = self.ctx.replicas.ensure_partition(tp, topic_configs or {}, now_ms=0)
            state = PartitionLeaderState(index, 1, leader_epoch, [1], 0, list(replicas))
            self.ctx.replicas.apply_leader_and_isr(partition, state, controller_epoch=1, now_ms=0)
            self.states.append(state)
        out = [PartitionLeaderState(tp.partition, 2, 1, [2], 0, [2]) for tp in OUT]
        self.ctx.metadata.update(
            UpdateMetadataRequest(
                ControllerHeader(1, 1, 1),
                [BrokerInfo(1, "h", 1), BrokerInfo(2, "h", 2)],
                [
                    TopicLeaderStates(TRANSACTION_STATE_TOPIC, self.states),
                    TopicLeaderStates("out", out),
                ],
            )
        )
        self.wall_ms = 1_000  # the manager's clock, moved by the tests
        self.manager = TransactionStateManager(self.ctx, leaders.write, lambda: self.wall_ms)

    def now(self) -> int:
        return self.wall_ms

    def lose_leadership(self, index: int) -> None:
        partition = self.ctx.replicas.partitions[TopicPartition(TRANSACTION_STATE_TOPIC, index)]
        state = PartitionLeaderState(index, 2, partition.leader_epoch + 1, [2], 1, [1, 2])
        self.ctx.replicas.apply_leader_and_isr(partition, state, controller_epoch=1, now_ms=0)
        self.manager.follow_roles()

    async def loaded(self) -> None:
        """Follow leadership and wait until every led partition is loaded."""
        self.manager.follow_roles()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while True:
            try:
                self.manager.entry(TX)
                return
            except CoordinatorLoadInProgressError:
                assert loop.time() < deadline, "the load did not finish"
                await asyncio.sleep(0.01)

    async def settled(self) -> None:
        """Wait for the markers and completions under way."""
        tasks = list(self.manager._finishing)
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)

    async def close(self) -> None:
        await self.manager.stop()
        self.ctx.replicas.close()


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


@pytest.fixture
def leaders() -> Iterator[Leaders]:
    yield Leaders()


def as_store(decision: object) -> Store:
    assert isinstance(decision, Store), decision
    return decision


async def begin(broker: Broker) -> TransactionEntry:
    """InitProducerId then AddPartitions for TX, each stored; the entry after."""
    manager = broker.manager
    init = init_producer_id(
        manager.entry(TX),
        TX,
        60_000,
        None,
        broker.now(),
        max_timeout_ms=900_000,
        allocate_producer_id=lambda: 4242,
    )
    await manager.store(as_store(init))
    await manager.store(as_store(add_partitions(manager.entry(TX), 4242, 0, OUT, broker.now())))
    entry = manager.entry(TX)
    assert entry is not None
    return entry


def test_an_id_stored_is_loaded_again_after_a_restart(tmp_path: Path, leaders: Leaders) -> None:
    async def scenario() -> tuple[TransactionMetadata, TransactionEntry | None]:
        first = Broker(tmp_path, leaders)
        await first.loaded()
        entry = await begin(first)
        await first.close()
        second = Broker(tmp_path, leaders)
        await second.loaded()
        again = second.manager.entry(TX)
        await second.close()
        return entry.metadata, again

    before, after = run(scenario)
    # What the previous producer id and epoch were is memory only (version 0 records).
    assert after == TransactionEntry(replace(before, last_producer_id=-1))
    assert after.metadata.state is TxnState.ONGOING and after.metadata.partitions == set(OUT)


def test_an_id_answers_load_in_progress_until_loaded_and_not_coordinator_once_led_elsewhere(
    tmp_path: Path, leaders: Leaders
) -> None:
    async def scenario() -> None:
        broker = Broker(tmp_path, leaders)
        broker.manager.follow_roles()
        with pytest.raises(CoordinatorLoadInProgressError, match="is loading"):
            broker.manager.entry(TX)
        await broker.loaded()
        await begin(broker)
        broker.lose_leadership(INDEX)
        with pytest.raises(
            NotCoordinatorError, match=f"does not lead {TRANSACTION_STATE_TOPIC}-{INDEX}"
        ):
            broker.manager.entry(TX)
        assert broker.manager.entries() == []
        await broker.close()

    run(scenario)


def test_a_commit_writes_its_markers_then_is_stored_complete(
    tmp_path: Path, leaders: Leaders
) -> None:
    leaders.fail = 1  # the first marker finds its leader moved, and is written again

    async def scenario() -> TransactionEntry | None:
        broker = Broker(tmp_path, leaders)
        await broker.loaded()
        entry = await begin(broker)
        commit = end_transaction(entry, 4242, 0, True, broker.now())
        await broker.manager.store(as_store(commit))
        await broker.settled()
        await broker.close()
        restarted = Broker(tmp_path, leaders)
        await restarted.loaded()
        stored = restarted.manager.entry(TX)
        await restarted.close()
        return stored

    stored = run(scenario)
    # Coordinator epoch 5: the leader epoch of the partition when it was loaded.
    assert sorted(leaders.written) == [(tp, 4242, 0, 5, True) for tp in OUT]
    assert stored is not None and stored.metadata.state is TxnState.COMPLETE_COMMIT
    assert stored.metadata.partitions == frozenset()


def test_a_transaction_found_prepared_on_load_is_completed(
    tmp_path: Path, leaders: Leaders
) -> None:
    async def scenario() -> TransactionEntry | None:
        first = Broker(tmp_path, leaders)
        await first.loaded()
        await begin(first)
        # The coordinator dies once PrepareAbort is stored, before any marker: written
        # straight to the log, as the append of a coordinator that then stops.
        partition = first.ctx.replicas.partitions[TopicPartition(TRANSACTION_STATE_TOPIC, INDEX)]
        prepared = TransactionMetadata(
            TX, 4242, 0, 60_000, TxnState.PREPARE_ABORT, frozenset(OUT), 1_000, 2_000
        )
        await internal_topic.append(first.manager.topic, partition, [record_of(prepared)])
        await first.close()
        second = Broker(tmp_path, leaders, leader_epoch=9)
        await second.loaded()
        await second.settled()
        stored = second.manager.entry(TX)
        await second.close()
        return stored

    stored = run(scenario)
    assert sorted(leaders.written) == [(tp, 4242, 0, 9, False) for tp in OUT]
    assert stored is not None and stored.metadata.state is TxnState.COMPLETE_ABORT


def test_a_failed_append_leaves_the_entry_as_it_was_and_raises_the_coordinator_error(
    tmp_path: Path, leaders: Leaders
) -> None:
    async def scenario() -> tuple[TransactionEntry | None, int]:
        # Two in-sync copies needed, one of two there: every append is refused.
        broker = Broker(
            tmp_path, leaders, topic_configs={"min.insync.replicas": "2"}, replicas=(1, 2)
        )
        await broker.loaded()
        init = as_store(
            init_producer_id(
                None, TX, 60_000, None, 5, max_timeout_ms=900_000, allocate_producer_id=lambda: 7
            )
        )
        with pytest.raises(CoordinatorNotAvailableError, match="storing in"):
            await broker.manager.store(init)
        entry = broker.manager.entry(TX)
        log_end = broker.ctx.replicas.partitions[
            TopicPartition(TRANSACTION_STATE_TOPIC, INDEX)
        ].log.log_end_offset
        await broker.close()
        return entry, log_end

    entry, log_end = run(scenario)
    # Kept as created (as Kafka keeps it), not pending, its epoch not handed out.
    assert entry == init_origin(7)
    assert log_end == 0


def init_origin(producer_id: int) -> TransactionEntry:
    return TransactionEntry(
        TransactionMetadata(TX, producer_id, -1, 60_000, TxnState.EMPTY, last_update_timestamp_ms=5)
    )


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    tmp_path: Path, leaders: Leaders
) -> None:
    async def scenario() -> tuple[int, int, TransactionEntry | None, object]:
        broker = Broker(tmp_path, leaders)
        await broker.loaded()
        await begin(broker)
        broker.wall_ms += 60_000
        early = await broker.manager.abort_timed_out()
        broker.wall_ms += 1
        aborted = await broker.manager.abort_timed_out()
        await broker.settled()
        entry = broker.manager.entry(TX)
        late_commit = end_transaction(entry, 4242, 0, True, broker.now())
        await broker.close()
        return early, aborted, entry, late_commit

    early, aborted, entry, late_commit = run(scenario)
    assert (early, aborted) == (0, 1)
    assert sorted(leaders.written) == [(tp, 4242, 1, 5, False) for tp in OUT]
    assert entry is not None and entry.metadata.state is TxnState.COMPLETE_ABORT
    assert entry.metadata.producer_epoch == 1
    assert late_commit == Reply(ProducerFencedError)


def test_an_idle_id_expires_as_a_tombstone_that_a_restart_reads(
    tmp_path: Path, leaders: Leaders
) -> None:
    week_ms = 604_800_000

    async def scenario() -> tuple[int, int, TransactionEntry | None]:
        broker = Broker(tmp_path, leaders)
        await broker.loaded()
        entry = await begin(broker)
        await broker.manager.store(as_store(end_transaction(entry, 4242, 0, True, broker.now())))
        await broker.settled()
        broker.wall_ms += week_ms - 1
        early = await broker.manager.expire_idle()
        broker.wall_ms += 1
        expired = await broker.manager.expire_idle()
        await broker.close()
        restarted = Broker(tmp_path, leaders)
        await restarted.loaded()
        after = restarted.manager.entry(TX)
        await restarted.close()
        return early, expired, after

    assert run(scenario) == (0, 1, None)


def test_the_sweeps_run_by_themselves_at_their_intervals(tmp_path: Path, leaders: Leaders) -> None:
    async def scenario() -> tuple[TransactionEntry | None, TransactionEntry | None]:
        broker = Broker(
            tmp_path,
            leaders,
            overrides={
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10",
                "transaction.remove.expired.transaction.cleanup.interval.ms": "10",
                "transactional.id.expiration.ms": "100000",
            },
        )
        await broker.loaded()
        await begin(broker)
        broker.wall_ms += 60_001
        broker.manager.start()
        aborted = await until(broker, lambda e: e.metadata.state is TxnState.COMPLETE_ABORT)
        broker.wall_ms += 100_000
        expired = await until(broker, lambda e: False)
        await broker.close()
        return aborted, expired

    aborted, expired = run(scenario)
    assert aborted is not None and aborted.metadata.producer_epoch == 1
    assert expired is None


async def until(
    broker: Broker, done: Callable[[TransactionEntry], bool]
) -> TransactionEntry | None:
    """The entry of TX once `done` says so or it is gone, waiting at most DEADLINE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while (entry := broker.manager.entry(TX)) is not None and not done(entry):
        assert loop.time() < deadline, f"still {entry}"
        await asyncio.sleep(0.01)
    return entry


def test_markers_refused_for_good_leave_the_transaction_prepared_and_say_why(
    tmp_path: Path, leaders: Leaders, caplog: pytest.LogCaptureFixture
) -> None:
    leaders.refuse = MessageTooLargeError("refused")

    async def scenario() -> tuple[TransactionEntry | None, object]:
        broker = Broker(tmp_path, leaders)
        await broker.loaded()
        entry = await begin(broker)
        await broker.manager.store(as_store(end_transaction(entry, 4242, 0, True, broker.now())))
        await broker.settled()
        after = broker.manager.entry(TX)
        retry = end_transaction(after, 4242, 0, True, broker.now())
        await broker.close()
        return after, retry

    with caplog.at_level(logging.INFO, logger="brokerd.transactions"):
        after, retry = run(scenario)
    assert after is not None and after.metadata.state is TxnState.PREPARE_COMMIT
    assert after.pending is None
    assert retry == Reply(ConcurrentTransactionsError)
    assert "could not be written: refused" in caplog.text
    assert "left prepared for the next load to finish" in caplog.text


def test_a_sink_transaction_is_loaded_with_its_participants_by_the_next_coordinator(
    tmp_path: Path, leaders: Leaders
) -> None:
    """A Spark sink's transaction, stored in replog's own value version: the coordinator
    that loads the partition after a failover (a new leader epoch) has its participants
    and micro-batches, ends it with a marker per participant, and answers a re-run of the
    committed micro-batch `already_committed` after a second failover."""
    task_a, task_b = DERIVED_PRODUCER_ID_BASE + 1, DERIVED_PRODUCER_ID_BASE + 2
    joined = [Participant(OUT[0], task_a, 7), Participant(OUT[0], task_b, 7)]
    joined.append(Participant(OUT[1], task_a, 7))

    async def scenario() -> tuple[TransactionEntry | None, TransactionEntry | None, object]:
        first = Broker(tmp_path, leaders)
        await first.loaded()
        manager = first.manager
        init = init_producer_id(
            None, TX, 60_000, None, 1, max_timeout_ms=900_000, allocate_producer_id=lambda: 4242
        )
        await manager.store(as_store(init))
        for participants in (joined[:2], joined[2:]):
            registration = register_participants(
                manager.entry(TX), 4242, 0, 7, participants, first.now()
            )
            await manager.store(as_store(registration))
        await first.close()
        second = Broker(tmp_path, leaders, leader_epoch=9)
        await second.loaded()
        loaded = second.manager.entry(TX)
        commit = end_transaction(loaded, 4242, 0, True, second.now())
        await second.manager.store(as_store(commit))
        await second.settled()
        await second.close()
        third = Broker(tmp_path, leaders, leader_epoch=10)
        await third.loaded()
        after = third.manager.entry(TX)
        rerun = register_participants(after, 4242, 0, 7, joined[:1], third.now())
        await third.close()
        return loaded, after, rerun

    loaded, after, rerun = run(scenario)
    assert loaded is not None
    assert loaded.metadata.state is TxnState.ONGOING
    assert loaded.metadata.participants == set(joined)
    assert (loaded.metadata.micro_batch, loaded.metadata.committed_micro_batch) == (7, -1)
    assert sorted(leaders.written) == sorted((p.tp, p.producer_id, 7, 9, True) for p in joined), (
        "one marker per participant, none for the driver"
    )
    assert after is not None and after.metadata.state is TxnState.COMPLETE_COMMIT
    assert after.metadata.committed_micro_batch == 7
    assert rerun == ALREADY_COMMITTED


def test_the_coordinator_registers_a_sink_tasks_participants_and_stores_them(
    tmp_path: Path, leaders: Leaders
) -> None:
    """TransactionCoordinator.register_participants, the one call a sink's registration
    API makes: decided on the id's entry and stored, then answered."""
    task = Participant(OUT[0], DERIVED_PRODUCER_ID_BASE + 3, 4)

    async def allocate() -> int:
        return 4242

    async def scenario() -> list[Reply]:
        broker = Broker(tmp_path, leaders)
        await broker.loaded()
        coordinator = TransactionCoordinator(broker.ctx, broker.manager, allocate, broker.now)
        replies = [await coordinator.init_producer_id(TX, 60_000, None)]
        replies.append(await coordinator.register_participants(TX, 4242, 0, 4, [task]))
        stored = broker.manager.entry(TX)
        assert stored is not None and stored.metadata.participants == {task}
        replies.append(await coordinator.end_transaction(TX, 4242, 0, True))
        await broker.settled()
        replies.append(await coordinator.register_participants(TX, 4242, 0, 4, [task]))
        replies.append(await coordinator.register_participants(TX, 4242, 1, 5, [task]))
        await broker.close()
        return replies

    replies = run(scenario)
    assert replies == [
        Reply(None, 4242, 0),
        Reply(),
        Reply(),
        ALREADY_COMMITTED,
        Reply(ProducerFencedError),
    ]
    assert leaders.written == [(OUT[0], task.producer_id, 4, 5, True)]
