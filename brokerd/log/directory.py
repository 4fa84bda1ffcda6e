"""The files of one partition directory: what ``Log.open`` finds there, and durability.

Besides segments (a .log file and its three indexes, named by base offset) a directory
holds the leader epoch checkpoint and, after a crash, leftovers of interrupted work.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from brokerd.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX

logger = logging.getLogger("brokerd.log")

STRAY_SUFFIXES = (".tmp", ".cleaned", ".deleted", ".swap")
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_SEGMENT_NAME_DIGITS = 20


def prepare_directory(directory: Path) -> list[int]:
    """Remove leftovers of interrupted work; return the base offsets of the segments."""
    base_offsets: set[int] = set()
    indexes: list[Path] = []
    for path in directory.iterdir():
        if path.suffix in STRAY_SUFFIXES:
            logger.warning("%s: removing leftover file", path)
            path.unlink()
        elif _is_segment_name(path, LOG_SUFFIX):
            base_offsets.add(int(path.stem))
        elif any(_is_segment_name(path, suffix) for suffix in INDEX_SUFFIXES):
            indexes.append(path)
    for path in indexes:
        if int(path.stem) not in base_offsets:
            logger.warning("%s: removing index without a log", path)
            path.unlink()
    return sorted(base_offsets)


def _is_segment_name(path: Path, suffix: str) -> bool:
    stem = path.stem
    return path.suffix == suffix and len(stem) == _SEGMENT_NAME_DIGITS and stem.isdigit()


def fsync_directory(directory: Path) -> None:
    """Make file creations and removals in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
