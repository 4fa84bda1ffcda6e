"""Putting cleaned segments in place of the old ones so that a crash leaves one or the other.

The cleaner writes each group of cleaned segments as one new segment whose files carry
the suffix ".cleaned" (`<base>.log.cleaned`, `.index.cleaned`, `.timeindex.cleaned`,
`.txnindex.cleaned`),
named by the base offset of the group's first old segment, and fsyncs them. The log
never reads such files. Then, as Kafka's `.cleaned` → `.swap` → rename protocol, in
steps each made durable before the next:

1. commit: write the swap manifest `<base>.swap` (atomically: temporary file, fsync,
   rename, fsync of the directory), one line per new segment naming the base offsets of
   the old segments it replaces. Before it exists the old segments are the log; from
   then on, the new ones: every group of the cleaning at once, never a mix.
2. per new segment: delete the old segments' files, except those named like the new
   segment's, then rename each `.cleaned` file over its final name (the index files
   first, the log last);
3. delete the manifest.

Kafka marks the new segment itself as `.swap` and, on recovery, finds the old segments
it replaces from the offsets the new one holds. That fails here when cleaning removed
every record of the group's last segments (their base offsets lie past the new
segment's end), so the manifest names them instead.

Recovery (`complete_interrupted_swaps`, run by Log.open before anything else reads the
directory) redoes steps 2 and 3 for every manifest it finds, each step being safe to
repeat: a file named in step 2 that is still there is old; a `.cleaned` file still there
has not been renamed yet. `.cleaned` files without a manifest are from a cleaning cut
before its commit: the log is still the old one, and Log.open removes them as strays.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from brokerd.log.checkpoint import write_lines_atomically
from brokerd.log.directory import fsync_directory
from brokerd.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from spark_replica.errors import CorruptRecordError

logger = logging.getLogger("brokerd.log")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
MANIFEST_MAGIC = "replog-cleaner-swap 1"
# The log file last: while it is still `.cleaned`, the final name holds no new log file.
SEGMENT_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)

SwapStep = Callable[[], None]
# A new segment's base offset, and the base offsets of the old segments it replaces.
SwapGroup = tuple[int, Sequence[int]]


def manifest_path(directory: Path, base_offset: int) -> Path:
    return segment_file(directory, base_offset, SWAP_SUFFIX)


def cleaned_files_exist(directory: Path, new_base: int) -> bool:
    return all(
        segment_file(directory, new_base, suffix + CLEANED_SUFFIX).exists()
        for suffix in SEGMENT_SUFFIXES
    )


def swap_steps(directory: Path, groups: Sequence[SwapGroup]) -> list[SwapStep]:
    """The steps that put every cleaned segment of one cleaning in place, in order.

    One manifest commits them all, so a crash leaves the whole old log or the whole new
    one. Separate steps so that tests can stop between any two, as a crash would.
    """
    if not groups or any(not replaced or replaced[0] != new for new, replaced in groups):
        raise ValueError("a cleaned segment is named by the first segment it replaces")
    manifest = manifest_path(directory, groups[0][0])

    def commit() -> None:
        lines = [MANIFEST_MAGIC, *(" ".join(map(str, replaced)) for _, replaced in groups)]
        write_lines_atomically(manifest, lines)

    def delete_manifest() -> None:
        manifest.unlink(missing_ok=True)
        fsync_directory(directory)

    steps: list[SwapStep] = [commit]
    for new_base, replaced in groups:
        steps.append(partial(_delete_old, directory, new_base, replaced))
        steps += [partial(_rename, directory, new_base, suffix) for suffix in SEGMENT_SUFFIXES]
    steps.append(delete_manifest)
    return steps


def swap_in(directory: Path, groups: Sequence[SwapGroup]) -> None:
    """Run every step of the swap."""
    for step in swap_steps(directory, groups):
        step()


def _delete_old(directory: Path, new_base: int, replaced: Sequence[int]) -> None:
    for base in replaced:
        for suffix in SEGMENT_SUFFIXES:
            final = segment_file(directory, base, suffix)
            cleaned = segment_file(directory, base, suffix + CLEANED_SUFFIX)
            if base != new_base or cleaned.exists():
                final.unlink(missing_ok=True)
    fsync_directory(directory)


def _rename(directory: Path, new_base: int, suffix: str) -> None:
    cleaned = segment_file(directory, new_base, suffix + CLEANED_SUFFIX)
    if cleaned.exists():
        os.replace(cleaned, segment_file(directory, new_base, suffix))
        fsync_directory(directory)


def complete_interrupted_swaps(directory: Path) -> int:
    """Finish every swap a crash interrupted after its commit; return how many."""
    finished = 0
    for path in sorted(directory.glob(f"*{SWAP_SUFFIX}")):
        if not path.name[: -len(SWAP_SUFFIX)].isdigit():
            continue
        groups = _read_manifest(path)
        logger.warning("%s: finishing the swap of cleaned segments %s", directory, groups)
        for step in swap_steps(directory, groups)[1:]:
            step()
        finished += 1
    return finished


def _read_manifest(path: Path) -> list[SwapGroup]:
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        if len(lines) < 2 or lines[0] != MANIFEST_MAGIC:
            raise ValueError("not a swap manifest")
        groups = [[int(field) for field in line.split()] for line in lines[1:]]
    except ValueError as exc:
        raise CorruptRecordError(f"{path}: unreadable cleaner swap manifest: {exc}") from exc
    if any(not replaced for replaced in groups) or groups[0][0] != int(
        path.name[: -len(SWAP_SUFFIX)]
    ):
        raise CorruptRecordError(f"{path}: the manifest does not start with its own segment")
    return [(replaced[0], tuple(replaced)) for replaced in groups]
