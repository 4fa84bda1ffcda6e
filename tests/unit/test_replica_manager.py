"""Which local partitions a broker drops when assignments change."""

from __future__ import annotations

from pathlib import Path

from brokerd.config import BrokerConfig
from brokerd.replica_manager import ReplicaManager
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
