"""The leader epoch history of one partition replica: at which offset each epoch began.

Truncating a follower to its high watermark when it changes leader loses committed
data, or lets replicas diverge, after two quick failovers (Kafka's KIP-101). A follower
instead asks the leader where the follower's latest epoch ended on the leader, and
truncates there. Both sides answer from this cache, which must survive restarts, so it
is kept in the partition directory as ``leader-epoch-checkpoint``: a version line
("0"), a count line, then "epoch start_offset" per entry, oldest first. Like the other
checkpoints, a write replaces the file atomically.

Entries have strictly increasing epochs and strictly increasing start offsets, and an
epoch is in force from its start offset up to the next entry's (or the log end).

The cache is changed in memory and written by ``flush()``; the Log decides when (see
``Log.open`` for how it makes a possibly stale file consistent with the segments).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

from brokerd.log.checkpoint import write_lines_atomically
from brokerd.log.directory import fsync_directory
from spark_replica.errors import ProtocolError

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
EPOCH_CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
UNDEFINED_EPOCH_END = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


class EpochEntry(NamedTuple):
    """Leader epoch `epoch` began at offset `start_offset` of the log."""

    epoch: int
    start_offset: int


def _epoch(entry: EpochEntry) -> int:
    return entry.epoch


def _start_offset(entry: EpochEntry) -> int:
    return entry.start_offset


class LeaderEpochCache:
    """The epoch -> start offset entries of one log, and the file that keeps them."""

    def __init__(self, path: Path, entries: list[EpochEntry], *, dirty: bool) -> None:
        self._path = path
        self._entries = entries
        self._dirty = dirty

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """The cache saved at `path`; empty if there is no file (the next flush creates it).

        Raises ProtocolError, naming the line, if the file is malformed.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path, [], dirty=True)
        return cls(path, _parse(path, text.splitlines()), dirty=False)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int:
        """The newest epoch known, or UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` began at `start_offset`, if it is newer than every known one.

        An older or equal epoch is ignored: its start is already known, and a batch of an
        older epoch after a newer one (which the leader never writes) must not rewrite
        history. Entries starting at or after `start_offset` are dropped first: the log
        was truncated below them and their records are gone.
        """
        if epoch <= self.latest_epoch:
            return
        if self._entries and self._entries[-1].start_offset >= start_offset:
            del self._entries[bisect_left(self._entries, start_offset, key=_start_offset) :]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._dirty = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Where `requested_epoch` ended in this log, as (epoch, end offset) (KIP-279).

        For the latest epoch that is the log end offset. For an older one it is the start
        of the first newer epoch, returned with the largest known epoch <= the requested
        one, which may be smaller when the requested epoch never led here (a follower with
        records of an epoch this leader never saw truncates to where that smaller epoch
        ended). UNDEFINED_EPOCH_END (-1, -1) when nothing can be said: an empty cache, an
        epoch newer than any known, or one older than the first known (retention removed
        that history). A follower given (-1, -1) falls back to truncating to its high
        watermark, or keeps its log if it has nothing beyond it.
        """
        if not self._entries or requested_epoch < self._entries[0].epoch:
            return UNDEFINED_EPOCH_END
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        newer = bisect_right(self._entries, requested_epoch, key=_epoch)
        if newer == len(self._entries):
            return UNDEFINED_EPOCH_END
        return self._entries[newer - 1].epoch, self._entries[newer].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs starting at or after `end_offset`: the log now ends there."""
        if self._entries and self._entries[-1].start_offset >= end_offset:
            del self._entries[bisect_left(self._entries, end_offset, key=_start_offset) :]
            self._dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now begins at `start_offset`: drop the epochs wholly before it.

        The epoch in force at `start_offset` stays, moved to start there, so the leader
        can still say where it ended.
        """
        in_force = bisect_right(self._entries, start_offset, key=_start_offset) - 1
        if in_force < 0 or (in_force == 0 and self._entries[0].start_offset == start_offset):
            return
        self._entries[: in_force + 1] = [EpochEntry(self._entries[in_force].epoch, start_offset)]
        self._dirty = True

    def clear(self) -> None:
        """Forget every epoch, and delete the file at once.

        The log is about to be emptied. If a crash stops that half way, the next open
        finds no file and rebuilds the cache from whatever segments are left, instead of
        trusting entries for records that may be gone.
        """
        self._entries.clear()
        self._dirty = True
        if self._path.exists():
            self._path.unlink()
            fsync_directory(self._path.parent)

    def flush(self) -> None:
        """Write the entries to the file atomically and durably, if they changed."""
        if not self._dirty:
            return
        lines = [str(EPOCH_CHECKPOINT_VERSION), str(len(self._entries))]
        lines += [f"{entry.epoch} {entry.start_offset}" for entry in self._entries]
        write_lines_atomically(self._path, lines)
        self._dirty = False


def _parse(path: Path, lines: list[str]) -> list[EpochEntry]:
    version = _int_line(path, lines, 1)
    if version != EPOCH_CHECKPOINT_VERSION:
        raise ProtocolError(f"{path}: line 1: unsupported checkpoint version {version}")
    count = _int_line(path, lines, 2)
    if count != len(lines) - 2:
        raise ProtocolError(f"{path}: line 2: count {count} but {len(lines) - 2} entries follow")
    entries: list[EpochEntry] = []
    for line_number, line in enumerate(lines[2:], start=3):
        try:
            epoch, start_offset = (int(field) for field in line.split())
        except ValueError as exc:
            raise ProtocolError(
                f"{path}: line {line_number}: expected 'epoch start_offset', got {line!r}"
            ) from exc
        if epoch < 0 or start_offset < 0:
            raise ProtocolError(f"{path}: line {line_number}: negative epoch or offset")
        if entries and (epoch <= entries[-1].epoch or start_offset <= entries[-1].start_offset):
            raise ProtocolError(
                f"{path}: line {line_number}: epoch and start offset must both grow"
            )
        entries.append(EpochEntry(epoch, start_offset))
    return entries


def _int_line(path: Path, lines: list[str], line_number: int) -> int:
    try:
        return int(lines[line_number - 1])
    except (IndexError, ValueError) as exc:
        raise ProtocolError(f"{path}: line {line_number}: expected an integer") from exc
