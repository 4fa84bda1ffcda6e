"""WriteTxnMarkers at a partition leader (brokerd/core/txn_markers.py), on real logs and
partitions, no processes: which partitions take a marker, each refusal's error, and the
answer waiting for the HW. And the inter-broker request the coordinator's sender builds
and reads back (brokerd/core/txn_marker_sender.py), through the wire bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from brokerd.core.txn_marker_sender import answered_errors, markers_request
from brokerd.core.txn_markers import (
    MarkerEntry,
    MarkerErrors,
    append_txn_markers,
    await_txn_markers,
)
from brokerd.kafka.request import KafkaRequest
from brokerd.kafka.write_txn_markers import handle_write_txn_markers
from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition
from spark_replica.errors import (
    BrokerNotAvailableError,
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from spark_replica.records import TRANSACTIONAL_FLAG, BatchHeader, build_batch, iter_batches
from spark_replica.security.acl import Authorizer
from spark_replica.topics import TopicPartition
from spark_replica.wire.native import REQUEST_TYPES, RESPONSE_TYPES
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.write_txn_markers import (
    MarkerPartitionResult,
    MarkerTopicResult,
    TxnMarkerResult,
    WriteTxnMarkersResponse,
)
from spark_replica.wire.primitives import Reader, Writer
from spark_replica.wire.schema import Data

A, B, ELSEWHERE, GONE = (TopicPartition(t, p) for t, p in [("a", 0), ("b", 1), ("a", 1), ("x", 0)])
PID, EPOCH, COORDINATOR_EPOCH = 7, 2, 5


def leader(tmp_path: Path, tp: TopicPartition, isr: list[int] | None = None) -> Partition:
    partition = Partition(
        tp, Log.open(tmp_path / f"{tp.topic}-{tp.partition}", LogConfig(), now_ms=0), 1
    )
    isr = isr or [1]
    partition.make_leader(0, isr, isr, 0, 0, now_ms=0)
    return partition


def open_transaction(partition: Partition, pid: int = PID, epoch: int = EPOCH) -> None:
    """Two plain records, then one transactional record of `pid` left open."""
    partition.append_as_leader(build_batch(["p0", "p1"], timestamps=[0, 0]), acks=1, now_ms=0)
    batch = build_batch(
        ["t0"],
        timestamps=[0],
        attributes=TRANSACTIONAL_FLAG,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
    )
    partition.append_as_leader(batch, acks=1, now_ms=0)


def entry(*partitions: TopicPartition, committed: bool = True, **fields: int) -> MarkerEntry:
    return MarkerEntry(
        producer_id=fields.get("producer_id", PID),
        producer_epoch=fields.get("producer_epoch", EPOCH),
        committed=committed,
        coordinator_epoch=fields.get("coordinator_epoch", COORDINATOR_EPOCH),
        partitions=partitions,
    )


def write(
    hosted: dict[TopicPartition, Partition], *entries: MarkerEntry, timeout_ms: int = 1000
) -> MarkerErrors:
    errors, appended = append_txn_markers(entries, hosted, lambda tp: tp != GONE, now_ms=10)
    asyncio.run(await_txn_markers(errors, appended, timeout_ms))
    return errors


def error_types(errors: MarkerErrors) -> list[dict[TopicPartition, type | None]]:
    return [{tp: None if e is None else type(e) for tp, e in each.items()} for each in errors]


def test_a_commit_ends_the_open_transaction_and_the_lso_moves_past_it(tmp_path: Path) -> None:
    partition = leader(tmp_path, A)
    open_transaction(partition)
    assert partition.last_stable_offset == 2
    assert write({A: partition}, entry(A)) == [{A: None}]
    marker: BatchHeader = next(iter_batches(partition.log.read(3, 1 << 20)))[0]
    assert marker.is_control and marker.producer_id == PID
    assert partition.last_stable_offset == partition.high_watermark == 4
    assert partition.log.aborted_transactions(0, 4) == []


def test_an_abort_is_indexed_for_read_committed_readers(tmp_path: Path) -> None:
    partition = leader(tmp_path, A)
    open_transaction(partition)
    assert write({A: partition}, entry(A, committed=False)) == [{A: None}]
    [aborted] = partition.log.aborted_transactions(0, 4)
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (PID, 2, 3)


def test_partitions_not_led_here_are_refused_each_on_its_own(tmp_path: Path) -> None:
    led = leader(tmp_path, A)
    open_transaction(led)
    follower = Partition(B, Log.open(tmp_path / "b-1", LogConfig(), now_ms=0), 1)
    follower.make_follower(2, 0, [1, 2], 0)
    errors = write({A: led, B: follower}, entry(ELSEWHERE, GONE, B, A))
    assert error_types(errors) == [
        {
            ELSEWHERE: NotLeaderOrFollowerError,
            GONE: UnknownTopicOrPartitionError,
            B: NotLeaderOrFollowerError,
            A: None,
        }
    ]
    assert follower.log.log_end_offset == 0


def test_too_few_replicas_in_sync_refuses_before_appending(tmp_path: Path) -> None:
    partition = leader(tmp_path, A)
    open_transaction(partition)
    partition.min_insync_replicas = 2
    partition.replicas = [1, 2]
    assert error_types(write({A: partition}, entry(A))) == [{A: NotEnoughReplicasError}]
    assert partition.log.log_end_offset == 3
    assert partition.producer_state.open_transactions() == {PID: 2}


def test_stale_producer_or_coordinator_epochs_are_fenced(tmp_path: Path) -> None:
    partition = leader(tmp_path, A)
    open_transaction(partition)
    errors = write(
        {A: partition},
        entry(A, producer_epoch=EPOCH - 1),
        entry(A, committed=False),
        entry(A, coordinator_epoch=COORDINATOR_EPOCH - 1),
    )
    assert error_types(errors) == [
        {A: InvalidProducerEpochError},
        {A: None},
        {A: TransactionCoordinatorFencedError},
    ]
    assert partition.log.log_end_offset == 4, "only the second entry's marker"


def test_a_partition_named_twice_in_one_entry_takes_one_marker(tmp_path: Path) -> None:
    partition = leader(tmp_path, A)
    open_transaction(partition)
    assert write({A: partition}, entry(A, A)) == [{A: None}]
    assert partition.log.log_end_offset == 4


def test_the_answer_waits_for_the_followers_and_times_out_without_them(tmp_path: Path) -> None:
    partition = leader(tmp_path, A, isr=[1, 2])
    open_transaction(partition)

    async def scenario() -> tuple[MarkerErrors, MarkerErrors]:
        first, appended = append_txn_markers([entry(A)], {A: partition}, bool, now_ms=10)
        await await_txn_markers(first, appended, timeout_ms=50)
        second, appended = append_txn_markers(
            [entry(A, committed=False)], {A: partition}, bool, now_ms=10
        )
        waiting = asyncio.create_task(await_txn_markers(second, appended, timeout_ms=5000))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        partition.record_follower_fetch(2, partition.log.log_end_offset, now_ms=20)
        await asyncio.wait_for(waiting, 5)
        return first, second

    first, second = asyncio.run(scenario())
    assert error_types(first) == [{A: RequestTimedOutError}]
    assert second == [{A: None}]
    assert partition.high_watermark == 5


# --------------------------------------------------------------------------- the sender


def through_the_wire(message: object, api_key: ApiKey, types: dict) -> object:
    writer = Writer()
    message.write(writer)  # type: ignore[attr-defined]
    return types[api_key].read(Reader(writer.getvalue()))


def test_the_inter_broker_request_groups_partitions_by_topic() -> None:
    entries = [entry(A, B, ELSEWHERE), entry(B, committed=False, producer_id=8)]
    request = through_the_wire(
        markers_request(entries, 1234), ApiKey.WRITE_TXN_MARKERS, REQUEST_TYPES
    )
    assert request == markers_request(entries, 1234)
    first, second = request.markers  # type: ignore[attr-defined]
    assert [(t.topic, t.partitions) for t in first.topics] == [("a", [0, 1]), ("b", [1])]
    assert (second.producer_id, second.committed, second.coordinator_epoch) == (8, False, 5)
    assert request.timeout_ms == 1234  # type: ignore[attr-defined]


def test_the_answer_is_read_back_per_partition_and_gaps_are_retriable() -> None:
    entries = [entry(A, B), entry(ELSEWHERE)]
    response = WriteTxnMarkersResponse(
        [
            TxnMarkerResult(
                PID,
                [
                    MarkerTopicResult("a", [MarkerPartitionResult(0)]),
                    MarkerTopicResult(
                        "b", [MarkerPartitionResult(1, InvalidProducerEpochError.code, "old")]
                    ),
                ],
            )
        ]
    )
    read = through_the_wire(response, ApiKey.WRITE_TXN_MARKERS, RESPONSE_TYPES)
    errors = answered_errors(entries, read)  # type: ignore[arg-type]
    assert error_types(errors) == [
        {A: None, B: InvalidProducerEpochError},
        {ELSEWHERE: BrokerNotAvailableError},
    ]
    assert errors[1][ELSEWHERE] is not None and errors[1][ELSEWHERE].retriable


def test_the_kafka_api_needs_cluster_action_on_the_cluster() -> None:
    authorizer = Authorizer(frozenset({"User:broker"}))
    authorizer.replace_all([])
    ctx: Any = SimpleNamespace(authorizer=authorizer)
    body = Data(
        markers=[
            Data(
                producer_id=PID,
                producer_epoch=EPOCH,
                transaction_result=False,
                topics=[Data(name="a", partition_indexes=[0, 1])],
                coordinator_epoch=COORDINATOR_EPOCH,
            )
        ]
    )
    request = KafkaRequest(27, 1, 1, "admin", "127.0.0.1", "User:admin", body)
    answer = asyncio.run(handle_write_txn_markers(ctx, request))
    assert isinstance(answer, Data)
    [marker] = answer.markers
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in marker.topics
    ] == [
        (
            "a",
            [(0, ClusterAuthorizationFailedError.code), (1, ClusterAuthorizationFailedError.code)],
        )
    ]


def test_one_partitions_markers_go_in_one_append_the_earliest_transaction_last(
    tmp_path: Path,
) -> None:
    partition = leader(tmp_path, A)
    open_transaction(partition)  # PID's transaction from offset 2
    later = build_batch(
        ["u0"],
        timestamps=[0],
        attributes=TRANSACTIONAL_FLAG,
        producer_id=PID + 1,
        producer_epoch=EPOCH,
        base_sequence=0,
    )
    partition.append_as_leader(later, acks=1, now_ms=0)  # PID + 1's from offset 3
    errors = write({A: partition}, entry(A), entry(A, producer_id=PID + 1))
    assert errors == [{A: None}, {A: None}]
    ends = [header.producer_id for header, _ in iter_batches(partition.log.read(4, 1 << 20))]
    assert ends == [PID + 1, PID]
    assert partition.last_stable_offset == partition.high_watermark == 6
