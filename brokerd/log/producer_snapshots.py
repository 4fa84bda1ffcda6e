"""Producer-state snapshot files in a partition directory: naming, writing, finding, pruning.

A snapshot named `<offset, 20 digits>.snapshot` holds the idempotent-producer state of
the log below `offset` (the lines of brokerd.producer_state's encode_snapshot; this
module does not read them). Retention deletes old segments, and with them the only
record of producers that have not written since; the snapshot keeps them known, and
makes rebuilding the state cheap: newest snapshot plus the headers after it.

The Log writes one when a segment rolls (at the new segment's base offset) and when it
closes (at the log end offset), and prunes the files that no longer describe its log:
those below the log start after retention, and those above the log end after a
truncation or a crash recovery (they describe batches that are gone). Writes are atomic
(temporary file, fsync, rename), so a crash leaves the old file or the new one; a
leftover temporary file is removed with the other strays when the log opens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from brokerd.log.checkpoint import write_lines_atomically
from brokerd.log.directory import fsync_directory

logger = logging.getLogger("brokerd.log")

SNAPSHOT_SUFFIX = ".snapshot"
_OFFSET_DIGITS = 20

# Called by the Log for the lines to write: `required` is True at a roll (retention may
# later remove the segments the state summarises) and False at close, where the source
# may answer None when it holds nothing the files and the log do not already say.
SnapshotSource = Callable[[bool], list[str] | None]


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:0{_OFFSET_DIGITS}d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshots in `directory`, ascending."""
    offsets = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if len(stem) == _OFFSET_DIGITS and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def write_snapshot(directory: Path, offset: int, lines: list[str]) -> None:
    write_lines_atomically(snapshot_path(directory, offset), lines)


def read_snapshot(directory: Path, offset: int) -> list[str]:
    """The lines of the snapshot at `offset`; OSError if it cannot be read."""
    return snapshot_path(directory, offset).read_text(encoding="utf-8").splitlines()


def delete_snapshots_outside(directory: Path, start_offset: int, end_offset: int) -> None:
    """Delete, durably, the snapshots below `start_offset` or above `end_offset`.

    Durably because one above the end that came back after a crash could later lie
    below a regrown log end while describing batches that a truncation removed.
    """
    _delete(
        directory, [o for o in snapshot_offsets(directory) if not start_offset <= o <= end_offset]
    )


def delete_all_snapshots(directory: Path) -> None:
    """Delete every snapshot durably: the log was emptied, no producer is left in it."""
    _delete(directory, snapshot_offsets(directory))


def _delete(directory: Path, doomed: list[int]) -> None:
    for offset in doomed:
        logger.info("%s: deleting producer snapshot at offset %d", directory, offset)
        snapshot_path(directory, offset).unlink(missing_ok=True)
    if doomed:
        fsync_directory(directory)
