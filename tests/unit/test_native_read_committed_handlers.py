"""replog's own Fetch and ListOffsets under read_committed, served from a real log.

The partition holds committed, aborted and open transactions written through the log's
own classes (markers through Partition.append_markers, the coordinator's path); the
handlers answer at version 1 and the answer goes through the wire both ways. The
client side (dropping what the answer lists) is tested in test_aborted_records.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.context import BrokerContext
from brokerd.native.fetch import handle_fetch
from brokerd.native.list_offsets import handle_list_offsets
from brokerd.replication.partition import Partition, TxnMarker
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.records import TRANSACTIONAL_FLAG, ControlType, build_batch, iter_batches
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import PartitionLeaderState
from spark_replica.wire.native.fetch import (
    AbortedTransaction,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from spark_replica.wire.native.produce import ACKS_LEADER
from spark_replica.wire.primitives import Reader, Writer

TP = TopicPartition("t", 0)
V1 = 1
# Offsets of the log the fixture writes.
ABORTED_FIRST = 2  # producer 1: 2..4, ABORT marker at 5
OPEN_FIRST = 8  # producer 3's transaction, still open
LOG_END = 10


def produce(partition: Partition, pid: int, count: int, *, txn: bool) -> None:
    batch = build_batch(
        [f"{pid}-{i}" for i in range(count)],
        timestamps=[1] * count,
        attributes=TRANSACTIONAL_FLAG if txn else 0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
    )
    partition.append_as_leader(batch, ACKS_LEADER, now_ms=1)


def end(partition: Partition, pid: int, kind: ControlType) -> None:
    partition.append_markers([TxnMarker(pid, 0, 0, kind)], now_ms=1)


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[BrokerContext]:
    """A leader of TP holding: 0-1 plain, 2-4 aborted (marker 5), 6 committed (marker 7),
    8 open, 9 plain; so the HW is 10 and the LSO 8."""
    config = BrokerConfig(1, tmp_path, "h:1")
    context = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
    partition = context.replicas.ensure_partition(TP, {}, now_ms=0)
    context.replicas.apply_leader_and_isr(
        partition, PartitionLeaderState(0, 1, 0, [1], 0, [1]), 1, 0
    )
    produce(partition, 9, 2, txn=False)
    produce(partition, 1, 3, txn=True)
    end(partition, 1, ControlType.ABORT)
    produce(partition, 2, 1, txn=True)
    end(partition, 2, ControlType.COMMIT)
    produce(partition, 3, 1, txn=True)
    produce(partition, 10, 1, txn=False)
    assert (partition.high_watermark, partition.last_stable_offset) == (LOG_END, OPEN_FIRST)
    yield context
    context.replicas.close()


def fetch(ctx: BrokerContext, isolation_level: int, version: int = V1) -> FetchPartitionResult:
    request = FetchRequest(
        0,
        1,
        1 << 20,
        [FetchTopic("t", [FetchPartition(0, 0, 1 << 20)])],
        isolation_level=isolation_level,
    )
    wire = Writer()
    request.write(wire, version)
    decoded = FetchRequest.read(Reader(wire.getvalue()), version)
    answer = Writer()
    asyncio.run(handle_fetch(ctx, decoded)).write(answer, version)
    return FetchResponse.read(Reader(answer.getvalue()), version).topics[0].partitions[0]


def offsets_of(records: bytes | memoryview) -> list[int]:
    return [header.base_offset for header, _ in iter_batches(bytes(records))]


def test_read_committed_stops_at_the_lso_and_lists_the_aborted_transaction(
    ctx: BrokerContext,
) -> None:
    answer = fetch(ctx, IsolationLevel.READ_COMMITTED)
    assert offsets_of(answer.records) == [0, 2, 5, 6, 7]
    assert answer.aborted_transactions == [AbortedTransaction(1, ABORTED_FIRST)]
    assert (answer.last_stable_offset, answer.high_watermark) == (OPEN_FIRST, LOG_END)


def test_read_uncommitted_reads_to_the_hw_and_still_learns_the_lso(ctx: BrokerContext) -> None:
    answer = fetch(ctx, IsolationLevel.READ_UNCOMMITTED)
    assert offsets_of(answer.records) == [0, 2, 5, 6, 7, 8, 9]
    assert answer.aborted_transactions == []
    assert answer.last_stable_offset == OPEN_FIRST


def test_a_version_0_fetch_reads_uncommitted_as_before(ctx: BrokerContext) -> None:
    answer = fetch(ctx, IsolationLevel.READ_UNCOMMITTED, version=0)
    assert offsets_of(answer.records) == [0, 2, 5, 6, 7, 8, 9]
    assert answer.last_stable_offset == -1  # not on the wire at v0


@pytest.mark.parametrize(
    ("isolation_level", "latest"),
    [(IsolationLevel.READ_COMMITTED, OPEN_FIRST), (IsolationLevel.READ_UNCOMMITTED, LOG_END)],
)
def test_latest_under_read_committed_is_the_lso(
    ctx: BrokerContext, isolation_level: int, latest: int
) -> None:
    request = ListOffsetsRequest(
        [ListOffsetsTopic("t", [ListOffsetsPartition(0, LATEST_TIMESTAMP)])],
        isolation_level=isolation_level,
    )
    wire = Writer()
    request.write(wire, V1)
    response = asyncio.run(
        handle_list_offsets(ctx, ListOffsetsRequest.read(Reader(wire.getvalue()), V1))
    )
    answer = Writer()
    response.write(answer, V1)
    decoded = ListOffsetsResponse.read(Reader(answer.getvalue()), V1)
    assert decoded.topics[0].partitions[0].offset == latest
