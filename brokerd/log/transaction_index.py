"""The aborted-transaction index of one segment: Kafka's `.txnindex` file.

A read_committed fetch must tell its reader which transactions of the range it returns
were aborted (the reader drops their records). Markers can lie far past the records of
their transaction, so the partition writes, at each ABORT marker it appends, one entry
to the index of the segment holding the marker, laid out as Kafka's (34 bytes,
big-endian)::

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first offset on this partition
    last_offset         int64   the marker's offset
    last_stable_offset  int64   the first offset of the earliest transaction still open
                                once this one ended (or last_offset + 1): no transaction
                                beginning below it ends in a later entry

Entries follow the markers' order, so `last_offset` grows. Appends reach the file at
once (page cache) and the disk with the segment's flushes; a crash can tear or lose the
tail of the active segment's index only, and recovery rebuilds that one from the log
(brokerd/replication/partition.py replays the producer state over it).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from pathlib import Path

from brokerd.log.index import IndexInconsistentError

ENTRY = struct.Struct(">hqqqq")
ENTRY_VERSION = 0
TEMPORARY_SUFFIX = ".tmp"  # a leftover is removed with the log directory's other strays


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """One producer's aborted transaction on the partition, from first offset to marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions whose markers lie in one segment, in marker order."""

    def __init__(self, path: Path, entries: Iterable[AbortedTransaction] = ()) -> None:
        self.path = path
        self.entries = list(entries)
        self._unsynced = False

    @classmethod
    def load(cls, path: Path) -> TransactionIndex:
        """Read an index file; IndexInconsistentError if it is missing, torn or malformed."""
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise IndexInconsistentError(f"{path.name} is missing") from exc
        if len(data) % ENTRY.size:
            raise IndexInconsistentError(
                f"{path.name} holds {len(data)} bytes, not whole {ENTRY.size}-byte entries"
            )
        entries: list[AbortedTransaction] = []
        for version, *fields in ENTRY.iter_unpack(data):
            entry = AbortedTransaction(*fields)
            if version != ENTRY_VERSION or entry.first_offset > entry.last_offset:
                raise IndexInconsistentError(f"{path.name} holds a malformed entry {entry}")
            if entries and entry.last_offset <= entries[-1].last_offset:
                raise IndexInconsistentError(f"{path.name} is not in marker order at {entry}")
            entries.append(entry)
        return cls(path, entries)

    def reset(self, entries: Iterable[AbortedTransaction] = ()) -> None:
        """Replace the file with `entries` (none: an empty file, a new segment's).

        Entries (a rebuild's, a cleaning's) are written aside, fsynced and renamed over
        the file: a crash then leaves the old file or all of the new one, never some of
        the entries in a file that looks whole.
        """
        self.entries = list(entries)
        if not self.entries:
            self.path.write_bytes(b"")
            self._unsynced = True
            return
        temporary = self.path.with_name(self.path.name + TEMPORARY_SUFFIX)
        temporary.write_bytes(b"".join(_encode(entry) for entry in self.entries))
        _fsync(temporary)
        os.replace(temporary, self.path)
        _fsync(self.path.parent)
        self._unsynced = False

    def append(self, entry: AbortedTransaction) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} comes after one ending "
                f"at {self.entries[-1].last_offset}"
            )
        with self.path.open("ab") as file:
            file.write(_encode(entry))
        self.entries.append(entry)
        self._unsynced = True

    def truncate_from(self, offset: int) -> None:
        """Forget the transactions whose marker is at or after `offset` (truncated away)."""
        kept = [entry for entry in self.entries if entry.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            os.truncate(self.path, len(kept) * ENTRY.size)
            self._unsynced = True

    def collect(self, start_offset: int, end_offset: int) -> tuple[list[AbortedTransaction], bool]:
        """The aborted transactions overlapping [start_offset, end_offset), and whether
        the search is complete: an entry here shows that every transaction beginning
        below `end_offset` had ended by then, so no later segment can add one."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= start_offset and entry.first_offset < end_offset:
                found.append(entry)
            if entry.last_stable_offset >= end_offset:
                return found, True
        return found, False

    def flush(self) -> None:
        if self._unsynced:
            _fsync(self.path)
            self._unsynced = False


def _fsync(path: Path) -> None:
    """fsync a file, or a directory (its entries: creations, renames)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(entry: AbortedTransaction) -> bytes:
    return ENTRY.pack(ENTRY_VERSION, *astuple(entry))
