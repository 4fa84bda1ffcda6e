"""What one partition of `__consumer_offsets` says about its groups, replayed in log order.

Pure: fed the (key, value) pairs of the partition's records oldest first, it keeps what
the last record for each key says, as compaction will (a null value removes). The
coordinator builds this when it becomes the partition's leader and keeps it up to date
with each record it appends, so that OffsetFetch and ListGroups are answered from
memory: a coordinator leads the partition it writes, so nothing else appends to it.

What the coordinator appends is applied as the change it made (`change`), not decoded
back from the bytes it wrote. Offsets committed in transactions wait in `pending`
(txn_offsets.py) until their marker: a load is given those of transactions still open
(`replay_open`), and a marker applies or drops them (`complete_transaction`); a plain
commit supersedes a pending transactional offset of the same partition.

A record that does not decode is skipped and counted rather than failing the load: one
damaged record must not make every group of the partition uncoordinated for good.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from brokerd.groups.txn_offsets import PendingTxnOffsets
from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


@dataclass(frozen=True, slots=True)
class OffsetChange:
    """A committed offset to store (None: to delete)."""

    group_id: str
    tp: TopicPartition
    value: OffsetValue | None

    def record(self) -> tuple[bytes, bytes | None]:
        value = None if self.value is None else encode_offset_value(self.value)
        return encode_offset_key(self.group_id, self.tp), value


@dataclass(frozen=True, slots=True)
class GroupChange:
    """A group's membership record to store (None: to delete)."""

    group_id: str
    value: GroupValue | None

    def record(self) -> tuple[bytes, bytes | None]:
        value = None if self.value is None else encode_group_value(self.value)
        return encode_group_key(self.group_id), value


Change = OffsetChange | GroupChange


@dataclass
class StoredGroup:
    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    metadata: GroupValue | None = None

    def is_empty(self) -> bool:
        return not self.offsets and self.metadata is None


@dataclass
class StoredGroups:
    """The groups of one offsets partition, by group id."""

    groups: dict[str, StoredGroup] = field(default_factory=dict)
    skipped: int = 0  # records that did not decode
    pending: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)

    def replay(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        for key, value in records:
            try:
                self.apply(key, value)
            except ProtocolError:
                self.skipped += 1

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise ProtocolError("an offsets topic record has no key")
        decoded = decode_key(key)
        if isinstance(decoded, OffsetKey):
            offset = None if value is None else decode_offset_value(value)
            self.set_offset(decoded.group_id, decoded.tp, offset)
        elif isinstance(decoded, GroupKey):
            metadata = None if value is None else decode_group_value(value)
            self.set_metadata(decoded.group_id, metadata)

    def change(self, change: Change) -> None:
        """Apply what an appended record says, without decoding it back."""
        if isinstance(change, OffsetChange):
            self.set_offset(change.group_id, change.tp, change.value)
            self.pending.supersede(change.group_id, {change.tp: None})
        else:
            self.set_metadata(change.group_id, change.value)

    def replay_open(self, producer_id: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """The offsets records of a transaction still open when the load ended: pending."""
        for key, value in records:
            try:
                decoded = decode_key(key)
                if not isinstance(decoded, OffsetKey) or value is None:
                    raise ProtocolError("a transaction holds a record that is not an offset")
                offset = decode_offset_value(value)
            except ProtocolError:
                self.skipped += 1
                continue
            self.pending.add(producer_id, decoded.group_id, {decoded.tp: offset})

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction ended on this partition: its offsets become the
        groups' committed offsets, or are dropped."""
        for group_id, offsets in self.pending.complete(producer_id, committed).items():
            for tp, offset in offsets.items():
                self.set_offset(group_id, tp, offset)

    def set_offset(self, group_id: str, tp: TopicPartition, offset: OffsetValue | None) -> None:
        group = self.groups.get(group_id)
        if offset is not None:
            if group is None:
                group = self.groups[group_id] = StoredGroup()
            group.offsets[tp] = offset
        elif group is not None:
            group.offsets.pop(tp, None)
            self._forget_if_empty(group_id, group)

    def set_metadata(self, group_id: str, metadata: GroupValue | None) -> None:
        group = self.groups.get(group_id)
        if metadata is not None:
            if group is None:
                group = self.groups[group_id] = StoredGroup()
            group.metadata = metadata
        elif group is not None:
            group.metadata = None
            self._forget_if_empty(group_id, group)

    def summary(self) -> str:
        skipped = f" ({self.skipped} records that did not decode skipped)" if self.skipped else ""
        return f"{len(self.groups)} groups{skipped}"

    def offsets_of(self, group_id: str) -> dict[TopicPartition, OffsetValue]:
        group = self.groups.get(group_id)
        return {} if group is None else dict(group.offsets)

    def metadata_of(self, group_id: str) -> GroupValue | None:
        group = self.groups.get(group_id)
        return None if group is None else group.metadata

    def _forget_if_empty(self, group_id: str, group: StoredGroup) -> None:
        if group.is_empty():
            del self.groups[group_id]
