"""Which local partitions a broker drops when assignments change."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.log import checkpoint
from brokerd.replication import replica_manager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.topics import TopicPartition

A = TopicPartition("a", 0)
B = TopicPartition("b", 0)


def test_only_partitions_older_than_the_read_are_dropped(tmp_path: Path) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    manager.ensure_partition(A, {}, now_ms=0)
    marker = manager.creation_marker()
    manager.ensure_partition(B, {}, now_ms=0)  # created while the assignments were read
    manager.delete_unassigned({}, marker)
    assert B in manager.partitions, "a partition newer than the read is kept"
    assert A not in manager.partitions and not (tmp_path / "a-0").exists()
    manager.delete_unassigned({B: [2, 3]}, manager.creation_marker())
    assert B not in manager.partitions, "assigned only to other brokers"
    manager.close()


def test_assigned_partitions_and_logs_loaded_from_disk(tmp_path: Path) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    manager.ensure_partition(A, {}, now_ms=0)
    manager.ensure_partition(B, {}, now_ms=0)
    manager.close()
    reopened = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    reopened.load_local_logs(now_ms=0)
    reopened.delete_unassigned({A: [1, 2]}, reopened.creation_marker())
    assert list(reopened.partitions) == [A]
    reopened.close()


def test_the_periodic_hw_checkpoint_is_written_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    manager.ensure_partition(A, {}, now_ms=0)
    writers: list[str] = []
    original = checkpoint.write_offsets_checkpoint

    def recording(path: Path, offsets: dict[tuple[str, int], int]) -> None:
        writers.append(threading.current_thread().name)
        original(path, offsets)

    monkeypatch.setattr(replica_manager, "write_offsets_checkpoint", recording)
    asyncio.run(manager.checkpoint_off_loop())
    assert len(writers) == 1 and writers[0] != threading.main_thread().name
    assert checkpoint.read_offsets_checkpoint(manager.checkpoint_path) == {A: 0}
    manager.close()


def test_an_older_hw_snapshot_never_replaces_a_newer_one(tmp_path: Path) -> None:
    """A periodic write that finishes after shutdown's final one must not undo it."""
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    older = manager._snapshot_high_watermarks()
    newer = manager._snapshot_high_watermarks()
    manager._write_checkpoint(newer[0], {A: 7})
    manager._write_checkpoint(older[0], {A: 3})
    assert checkpoint.read_offsets_checkpoint(manager.checkpoint_path) == {A: 7}
    manager.close()
