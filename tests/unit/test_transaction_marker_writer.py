"""Where the coordinator's markers go (brokerd/transactions/marker_writer.py), no processes:
a partition led here is appended on real log files (broker 1's ReplicaManager on a
temporary directory) and its marker committed; one led by another broker goes to the
SendMarkers callable, recorded here, whose per-partition error is raised; one with no
leader now is NOT_LEADER_OR_FOLLOWER, which the markers' loop retries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.context import BrokerContext
from brokerd.core.txn_markers import MarkerEntry, MarkerErrors
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from brokerd.transactions.marker_writer import MarkerWriter
from brokerd.transactions.markers import Marker
from spark_replica.errors import InvalidProducerEpochError, NotLeaderOrFollowerError, ReplogError
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    PartitionLeaderState,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo

HERE, THERE, LEADERLESS = (TopicPartition("out", p) for p in range(3))
PRODUCER_ID, EPOCH, COORDINATOR_EPOCH = 7, 3, 11
DEADLINE_S = 30.0


class Sent:
    """The SendMarkers of the other brokers, recorded; answers `error` for each."""

    def __init__(self, error: ReplogError | None = None) -> None:
        self.calls: list[tuple[int, list[MarkerEntry]]] = []
        self.error = error

    async def __call__(self, leader_id: int, entries: Sequence[MarkerEntry]) -> MarkerErrors:
        self.calls.append((leader_id, list(entries)))
        return [dict.fromkeys(entry.partitions, self.error) for entry in entries]


def context(log_dir: Path) -> BrokerContext:
    """Broker 1, leading `HERE` alone; `THERE` led by broker 2; `LEADERLESS` by none."""
    config = BrokerConfig(1, log_dir, "h:1")
    ctx = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
    here = PartitionLeaderState(HERE.partition, 1, 0, [1], 0, [1])
    partition = ctx.replicas.ensure_partition(HERE, {}, now_ms=0)
    ctx.replicas.apply_leader_and_isr(partition, here, controller_epoch=1, now_ms=0)
    there = PartitionLeaderState(THERE.partition, 2, 0, [2], 0, [2])
    leaderless = PartitionLeaderState(LEADERLESS.partition, -1, 0, [], 0, [2])
    ctx.metadata.update(
        UpdateMetadataRequest(
            ControllerHeader(1, 1, 1),
            [BrokerInfo(1, "h", 1), BrokerInfo(2, "h", 2)],
            [TopicLeaderStates("out", [here, there, leaderless])],
        )
    )
    return ctx


def write(writer: MarkerWriter, tp: TopicPartition, committed: bool = True) -> None:
    marker = Marker(tp, PRODUCER_ID, EPOCH, COORDINATOR_EPOCH, committed)
    asyncio.run(asyncio.wait_for(writer(tp, [marker]), DEADLINE_S))


def test_a_partition_led_here_gets_its_marker_appended_and_committed(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    sent = Sent()
    try:
        write(MarkerWriter(ctx, sent), HERE)
        partition = ctx.replicas.partitions[HERE]
        assert (partition.log.log_end_offset, partition.high_watermark) == (1, 1)
        assert sent.calls == []
    finally:
        ctx.replicas.close()


def test_a_partition_led_elsewhere_is_sent_to_its_leader(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    sent = Sent()
    try:
        write(MarkerWriter(ctx, sent), THERE, committed=False)
        entry = MarkerEntry(PRODUCER_ID, EPOCH, False, COORDINATOR_EPOCH, (THERE,))
        assert sent.calls == [(2, [entry])]
    finally:
        ctx.replicas.close()


def test_a_leaders_refusal_is_raised_and_no_leader_is_not_leader_or_follower(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    try:
        with pytest.raises(InvalidProducerEpochError):
            write(MarkerWriter(ctx, Sent(InvalidProducerEpochError("stale"))), THERE)
        with pytest.raises(NotLeaderOrFollowerError):
            write(MarkerWriter(ctx, Sent()), LEADERLESS)
    finally:
        ctx.replicas.close()


def test_a_partitions_markers_go_in_one_request_and_a_fence_is_raised_first(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    markers = [Marker(THERE, pid, EPOCH, COORDINATOR_EPOCH, True) for pid in (7, 8)]
    sent = Sent()
    fenced = Sent()

    async def answer_mixed(leader_id: int, entries: Sequence[MarkerEntry]) -> MarkerErrors:
        await fenced(leader_id, entries)
        return [{THERE: NotLeaderOrFollowerError("moved")}, {THERE: InvalidProducerEpochError("x")}]

    try:
        asyncio.run(MarkerWriter(ctx, sent)(THERE, markers))
        assert sent.calls == [
            (2, [MarkerEntry(pid, EPOCH, True, COORDINATOR_EPOCH, (THERE,)) for pid in (7, 8)])
        ]
        with pytest.raises(InvalidProducerEpochError):
            asyncio.run(MarkerWriter(ctx, answer_mixed)(THERE, markers))
    finally:
        ctx.replicas.close()
