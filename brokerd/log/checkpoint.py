"""Small text files recording one offset per partition, such as the high watermarks.

The format is Kafka's: a version line ("0"), a count line, then "topic partition offset"
per entry. Topic names never contain whitespace, so splitting on it is safe. A write
replaces the file atomically, so a crash leaves either the old or the new checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from brokerd.log.directory import fsync_directory
from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
CHECKPOINT_VERSION = 0


def write_offsets_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Write `offsets` to `path` atomically and durably (file, then directory, fsynced)."""
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    ]
    write_lines_atomically(path, lines)


def write_lines_atomically(path: Path, lines: list[str]) -> None:
    """Replace `path` with `lines` durably: a crash leaves the old file or the new one.

    Write a temporary file, fsync it, rename it over `path`, fsync the directory.
    """
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def read_offsets_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in `path`; {} if it does not exist. Raises ProtocolError if malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    version = _int_field(path, lines, 1)
    if version != CHECKPOINT_VERSION:
        raise ProtocolError(f"{path}: line 1: unsupported checkpoint version {version}")
    count = _int_field(path, lines, 2)
    entries = lines[2:]
    if count != len(entries):
        raise ProtocolError(f"{path}: line 2: count {count} but {len(entries)} entries follow")
    offsets: dict[TopicPartition, int] = {}
    for line_number, line in enumerate(entries, start=3):
        fields = line.split()
        if len(fields) != 3:
            raise ProtocolError(f"{path}: line {line_number}: expected 'topic partition offset'")
        topic, partition, offset = fields
        try:
            key = TopicPartition(topic, int(partition))
            value = int(offset)
        except ValueError as exc:
            raise ProtocolError(f"{path}: line {line_number}: {exc}") from exc
        if key in offsets:
            raise ProtocolError(f"{path}: line {line_number}: {topic}-{partition} repeated")
        offsets[key] = value
    return offsets


def _int_field(path: Path, lines: list[str], line_number: int) -> int:
    try:
        return int(lines[line_number - 1])
    except (IndexError, ValueError) as exc:
        raise ProtocolError(f"{path}: line {line_number}: expected an integer") from exc
