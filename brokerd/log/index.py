"""Sparse indexes of one segment: offset -> file position, and timestamp -> offset.

Each index is two parallel arrays in memory, both strictly increasing, so a lookup is
a binary search. The file holds the same entries big-endian, as a prefix of what is in
memory: new entries are written in bulk on flush, because a crash only ever loses
entries of the active segment, and the active segment's indexes are rebuilt from its
log on recovery anyway.

Offsets are stored relative to the segment's base offset (int32), which is why a
segment rolls before a relative offset or a position would overflow int32.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from itertools import pairwise
from pathlib import Path
from typing import ClassVar, Self


class IndexInconsistentError(Exception):
    """An index file cannot be trusted; the caller rebuilds it from the log."""


class _SparseIndex:
    """Entries (key, value) with both columns strictly increasing."""

    key_code: ClassVar[str]
    entry_format: ClassVar[struct.Struct]

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys = array(self.key_code)
        self.values = array("i")
        self._entries_in_file = 0
        self._unsynced = False

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def create(cls, path: Path) -> Self:
        """An empty index whose file exists (empty) from now on."""
        index = cls(path)
        index.reset()
        return index

    @classmethod
    def load(cls, path: Path) -> Self:
        """Read an index file; raises IndexInconsistentError if it is missing or malformed."""
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise IndexInconsistentError(f"{path.name} is missing") from exc
        size = cls.entry_format.size
        if len(data) % size:
            raise IndexInconsistentError(
                f"{path.name} has {len(data)} bytes, not a multiple of {size}"
            )
        index = cls(path)
        for key, value in cls.entry_format.iter_unpack(data):
            index.keys.append(key)
            index.values.append(value)
        index._entries_in_file = len(index.keys)
        index._check_increasing()
        return index

    def _check_increasing(self) -> None:
        for column in (self.keys, self.values):
            if any(a >= b for a, b in pairwise(column)):
                raise IndexInconsistentError(f"{self.path.name} entries are not increasing")

    def append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)
        self._unsynced = True

    def last(self) -> tuple[int, int] | None:
        if not self.keys:
            return None
        return self.keys[-1], self.values[-1]

    def floor_value(self, key: int) -> int | None:
        """The value of the last entry whose key is <= `key`, if any."""
        slot = bisect_right(self.keys, key) - 1
        return self.values[slot] if slot >= 0 else None

    def truncate_values_from(self, value: int) -> None:
        """Drop every entry whose value is >= `value`, in memory and on disk."""
        keep = bisect_left(self.values, value)
        del self.keys[keep:]
        del self.values[keep:]
        if keep < self._entries_in_file:
            os.truncate(self.path, keep * self.entry_format.size)
            self._entries_in_file = keep
            self._unsynced = True

    def reset(self) -> None:
        """Empty the index and its file, ready to be rebuilt."""
        del self.keys[:]
        del self.values[:]
        self.path.write_bytes(b"")
        self._entries_in_file = 0
        self._unsynced = True

    def flush(self) -> None:
        """Write the entries the file lacks and fsync it, if anything changed."""
        if not self._unsynced:
            return
        start = self._entries_in_file
        pack = self.entry_format.pack
        pending = zip(self.keys[start:], self.values[start:], strict=True)
        data = b"".join(pack(key, value) for key, value in pending)
        with open(self.path, "ab") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        self._entries_in_file = len(self.keys)
        self._unsynced = False


class OffsetIndex(_SparseIndex):
    """Relative offset of a batch's base -> position of the batch in the segment file."""

    key_code = "i"
    entry_format = struct.Struct(">ii")

    def position_at_or_before(self, relative_offset: int) -> int:
        """A file position where a batch starts whose base offset is <= `relative_offset`."""
        position = self.floor_value(relative_offset)
        return 0 if position is None else position

    def furthest_position_within(self, max_relative_offset: int, max_position: int) -> int | None:
        """The last indexed batch start such that every batch before it is inside both limits.

        Batches before an entry end at or before its position and have offsets below its
        base offset, so the entry qualifies if its position is <= `max_position` and its
        relative offset is <= `max_relative_offset`.
        """
        slot = (
            min(
                bisect_right(self.values, max_position),
                bisect_right(self.keys, max_relative_offset),
            )
            - 1
        )
        return self.values[slot] if slot >= 0 else None

    def truncate_from_position(self, position: int) -> None:
        self.truncate_values_from(position)


class TimeIndex(_SparseIndex):
    """Max timestamp so far -> relative base offset of the batch that raised it to that.

    An entry (T, O) promises that every record before offset O has a timestamp below T,
    so a search for records at or after a target may start at O whenever T <= target.
    """

    key_code = "q"
    entry_format = struct.Struct(">qi")

    def start_offset_for(self, timestamp_ms: int) -> int:
        """A relative offset before which no record has a timestamp >= `timestamp_ms`."""
        relative_offset = self.floor_value(timestamp_ms)
        return 0 if relative_offset is None else relative_offset

    def truncate_from_offset(self, relative_offset: int) -> None:
        self.truncate_values_from(relative_offset)
