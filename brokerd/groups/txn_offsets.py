"""Offsets committed inside transactions (TxnOffsetCommit), pending until their marker.

A transactional producer commits its consumer's offsets with the records it produced
(`send_offsets_to_transaction`): the group coordinator appends them to the group's
offsets partition as that producer's transactional records, and they become the group's
committed offsets only when the transaction coordinator's COMMIT marker lands on that
partition; an ABORT drops them. Until then OffsetFetch does not show them, and a fetch
that requires stable offsets (require_stable, v7+) is answered UNSTABLE_OFFSET_COMMIT
for the partitions they name.

Kafka's ordering rule: of a transactional commit and a plain commit of the same group
and partition, the one appended later wins. So a plain commit appended while a
transaction holds an offset of that partition supersedes it (the transaction's offset is
dropped, and its marker changes nothing there), and a transactional commit appended
after a plain one overrides it once committed. The same rule holds when a partition is
loaded (brokerd/coordination/internal_topic.py: a later plain record of a key
supersedes an open transaction's record of it).

Pure; one per loaded offsets partition, owned by the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue

# group id -> partition -> the offset a transaction commits there
GroupOffsets = dict[str, dict[TopicPartition, OffsetValue]]


@dataclass
class PendingTxnOffsets:
    """Per producer id, the offsets its open transaction committed, by group."""

    _by_producer: dict[int, GroupOffsets] = field(default_factory=dict)

    def add(
        self, producer_id: int, group_id: str, offsets: Mapping[TopicPartition, OffsetValue]
    ) -> None:
        """The producer's transaction committed `offsets` for the group (a later commit
        of the same partition in the same transaction replaces the earlier)."""
        if offsets:
            self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def complete(self, producer_id: int, committed: bool) -> GroupOffsets:
        """The producer's transaction ended: what it committed, to apply if `committed`
        (empty after an ABORT); nothing stays pending for it."""
        ended = self._by_producer.pop(producer_id, {})
        return ended if committed else {}

    def supersede(self, group_id: str, partitions: Mapping[TopicPartition, object]) -> None:
        """A plain commit of the group's `partitions` was appended: every transaction's
        offset of those partitions is older and will not apply."""
        for producer_id in list(self._by_producer):
            groups = self._by_producer[producer_id]
            pending = groups.get(group_id)
            if pending is None:
                continue
            for tp in partitions:
                pending.pop(tp, None)
            if not pending:
                del groups[group_id]
            if not groups:
                del self._by_producer[producer_id]

    def is_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of the group's partition."""
        return any(tp in groups.get(group_id, {}) for groups in self._by_producer.values())

    def producers(self) -> list[int]:
        """The producers with offsets pending, for tests and logs."""
        return sorted(self._by_producer)
