"""The partitions this broker hosts: their logs on disk, their roles, their checkpoints.

Concurrency: owned by the broker's event loop, like the Partitions it holds. The one
exception is writing the HW checkpoint: its fsyncs take tens of milliseconds on a busy
disk, which on the loop would stall every request, so the periodic write snapshots the
HWs on the loop and writes the file on a worker thread (`checkpoint_off_loop`).

Log directory layout: one folder per partition named ``<topic>-<partition>``, the HW
checkpoint file beside them, and the broker's own log file.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from pathlib import Path

from brokerd.config.broker import BrokerConfig
from brokerd.log import HW_CHECKPOINT_FILE, Log, read_offsets_checkpoint, write_offsets_checkpoint
from brokerd.metrics.registry import BrokerMetrics
from brokerd.replication.partition import Partition
from spark_replica.errors import (
    FencedLeaderEpochError,
    InvalidTopicError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from spark_replica.topics import TopicPartition, validate_topic_name
from spark_replica.wire.native.controller_requests import PartitionLeaderState

logger = logging.getLogger("brokerd.replica_manager")


def parse_partition_dir(name: str) -> TopicPartition | None:
    """`orders-3` -> ('orders', 3); None for anything that is not a partition folder."""
    topic, dash, number = name.rpartition("-")
    if not dash or not number.isdigit():
        return None
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return TopicPartition(topic, int(number))


class ReplicaManager:
    def __init__(self, config: BrokerConfig, metrics: BrokerMetrics | None = None) -> None:
        self.config = config
        # The broker's metrics (a set of its own when none is given): like Kafka's
        # ReplicaManager, this is where produced bytes and ISR changes are counted.
        self.metrics = BrokerMetrics() if metrics is None else metrics
        self.partitions: dict[TopicPartition, Partition] = {}
        self.checkpoint_path = config.log_dir / HW_CHECKPOINT_FILE
        self._created = 0  # a counter of creations; partitions loaded from disk count as 0
        self._births: dict[TopicPartition, int] = {}
        self._checkpoint_lock = threading.Lock()
        self._snapshots = itertools.count(1)
        self._written_snapshot = 0  # guarded by _checkpoint_lock

    def partition_dir(self, tp: TopicPartition) -> Path:
        return self.config.log_dir / f"{tp.topic}-{tp.partition}"

    def load_local_logs(self, now_ms: int) -> None:
        """Open (and recover) every partition folder found in the log directory."""
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        high_watermarks = read_offsets_checkpoint(self.checkpoint_path)
        for entry in sorted(self.config.log_dir.iterdir()):
            tp = parse_partition_dir(entry.name) if entry.is_dir() else None
            if tp is None:
                continue
            log = Log.open(entry, self.config.log_defaults, now_ms=now_ms)
            partition = Partition(tp, log, self.config.broker_id, high_watermarks.get(tp, 0))
            partition.min_insync_replicas = self.config.min_insync_replicas
            partition.compression_type = self.config.compression_type
            self.partitions[tp] = partition
            logger.info("loaded %s: log end offset %d", tp, log.log_end_offset)

    def creation_marker(self) -> int:
        """Taken before reading assignments: partitions created later are never stale."""
        return self._created

    def delete_unassigned(self, assignments: dict[TopicPartition, list[int]], marker: int) -> None:
        """Drop local logs of partitions not assigned to this broker (seed section E).

        Only partitions that existed when the assignments were read (birth <= marker) are
        considered, so a slow read can never delete a partition created after it began.
        """
        broker_id = self.config.broker_id
        for tp in [
            tp
            for tp in self.partitions
            if self._births.get(tp, 0) <= marker and broker_id not in assignments.get(tp, [])
        ]:
            self.delete_partition(tp)

    def ensure_partition(
        self, tp: TopicPartition, topic_configs: dict[str, str], now_ms: int
    ) -> Partition:
        """The partition, created with `topic_configs` if this broker does not host it yet.

        The configs are applied only on creation: LeaderAndIsr reads them just for new
        partitions, and later changes arrive through apply_topic_config, which an empty
        dict here must not undo.
        """
        partition = self.partitions.get(tp)
        if partition is None:
            log_config = self.config.log_config_for(topic_configs)
            log = Log.open(self.partition_dir(tp), log_config, now_ms=now_ms)
            partition = Partition(tp, log, self.config.broker_id)
            partition.min_insync_replicas = self.config.min_insync_for(topic_configs)
            partition.compression_type = self.config.compression_type_for(topic_configs)
            self.partitions[tp] = partition
            self._created += 1
            self._births[tp] = self._created
        return partition

    def apply_topic_config(self, topic: str, configs: dict[str, str], now_ms: int) -> int:
        """Apply a topic's (altered) config to its local partitions; return how many.

        The log settings take effect at each log's next roll, retention or flush decision
        (a lowered flush.ms is checked at once), min.insync.replicas at the next acks=all
        produce, compression.type at the next Kafka fetch. An invalid config raises
        ConfigError before any partition changes. unclean.leader.election.enable is the
        controller's to read, not the broker's.
        """
        log_config = self.config.log_config_for(configs)
        min_insync = self.config.min_insync_for(configs)
        compression_type = self.config.compression_type_for(configs)
        applied = 0
        for tp, partition in self.partitions.items():
            if tp.topic != topic:
                continue
            partition.log.update_config(log_config)
            partition.min_insync_replicas = min_insync
            partition.compression_type = compression_type
            partition.log.maybe_flush(now_ms)
            applied += 1
        return applied

    def apply_leader_and_isr(
        self, partition: Partition, state: PartitionLeaderState, controller_epoch: int, now_ms: int
    ) -> bool:
        """Lead or follow as the controller says; True if now following a new leader/epoch.

        A state older than the one already applied is refused (FENCED_LEADER_EPOCH), so a
        delayed request from an earlier decision cannot undo a later one. A state at the
        epoch already applied is ignored (STALE_CONTROLLER_EPOCH, as Kafka answers): the
        controller bumps the epoch with every decision, so it holds nothing new, and its
        ISR and zkVersion may be older than those this leader has written since.
        """
        if state.leader_epoch < partition.leader_epoch:
            raise FencedLeaderEpochError(
                f"{partition.tp}: leader epoch {state.leader_epoch} is older than "
                f"{partition.leader_epoch}"
            )
        if state.leader_epoch == partition.leader_epoch:
            raise StaleControllerEpochError(
                f"{partition.tp}: already at leader epoch {state.leader_epoch}; ignored"
            )
        if state.leader == self.config.broker_id:
            if partition.is_leader:
                # The controller changed the ISR of a partition led here (a replica died):
                # a change of this leader's ISR like one it writes itself.
                self.metrics.isr_changed(partition.isr, state.isr)
            partition.make_leader(
                state.leader_epoch,
                state.isr,
                state.replicas,
                state.zk_version,
                controller_epoch,
                now_ms,
            )
            return False
        return partition.make_follower(
            state.leader, state.leader_epoch, state.replicas, controller_epoch
        )

    def delete_partition(self, tp: TopicPartition) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is None:
            return
        partition.stop()
        partition.log.delete()
        logger.info("deleted the log of %s", tp)
        if all(other.topic != tp.topic for other in self.partitions):
            self.metrics.forget_topic(tp.topic)

    def get_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise UnknownTopicOrPartitionError(f"this broker hosts no partition {tp}")
        return partition

    def checkpoint_high_watermarks(self) -> None:
        """Write the HWs now, on the calling thread (start-up and shutdown)."""
        self._write_checkpoint(*self._snapshot_high_watermarks())

    async def checkpoint_off_loop(self) -> None:
        """Snapshot the HWs here, on the loop, and write them on a worker thread."""
        await asyncio.to_thread(self._write_checkpoint, *self._snapshot_high_watermarks())

    def _snapshot_high_watermarks(self) -> tuple[int, dict[TopicPartition, int]]:
        return next(self._snapshots), {tp: p.high_watermark for tp, p in self.partitions.items()}

    def _write_checkpoint(self, snapshot: int, offsets: dict[TopicPartition, int]) -> None:
        """Write one snapshot unless a later one is already on disk.

        A periodic write still running on its thread when shutdown writes the final
        snapshot must neither interleave with it (same temporary file) nor replace it
        afterwards with older HWs.
        """
        with self._checkpoint_lock:
            if snapshot <= self._written_snapshot:
                return
            write_offsets_checkpoint(self.checkpoint_path, offsets)
            self._written_snapshot = snapshot

    def maybe_flush(self, now_ms: int) -> None:
        for partition in self.partitions.values():
            partition.log.maybe_flush(now_ms)

    def propose_isr_shrinks(self, now_ms: int, lag_max_ms: int) -> list[Partition]:
        """Led partitions whose lagging followers should leave the ISR."""
        return [p for p in self.partitions.values() if p.propose_isr_shrink(now_ms, lag_max_ms)]

    def expire_producers(self, now_ms: int) -> None:
        expiration = self.config.producer_id_expiration_ms
        expired = sum(p.expire_producers(now_ms, expiration) for p in self.partitions.values())
        if expired:
            logger.info("forgot %d producer ids idle for %d ms", expired, expiration)

    def delete_expired_segments(self, now_ms: int) -> None:
        for partition in self.partitions.values():
            partition.log.delete_expired_segments(now_ms)

    def close(self) -> None:
        """Flush every log, write the HW checkpoint, close the files."""
        for partition in self.partitions.values():
            partition.log.flush()
        self.checkpoint_high_watermarks()
        for partition in self.partitions.values():
            partition.log.close()
