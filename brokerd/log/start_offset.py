"""The log start offset a DeleteRecords request set, kept in the partition directory.

Retention moves the log start by deleting whole segments, so the first segment's base
offset records it. A DeleteRecords request may move it into the middle of a segment,
which the segment files cannot say; this file does. It holds a version line ("0") and
the offset, and is replaced atomically, so a crash leaves the old start or the new one.
It is written before the segments below the new start are deleted: a crash between the
two leaves segments that ``Log.open`` deletes again, never a start that went back.
"""

from __future__ import annotations

from pathlib import Path

from brokerd.log.checkpoint import write_lines_atomically
from spark_replica.errors import ProtocolError

LOG_START_OFFSET_FILE = "log-start-offset"
_VERSION = 0


def write_log_start_offset(directory: Path, offset: int) -> None:
    """Record `offset` as the log start of the log in `directory`, durably."""
    write_lines_atomically(directory / LOG_START_OFFSET_FILE, [str(_VERSION), str(offset)])


def read_log_start_offset(directory: Path) -> int:
    """The recorded log start of the log in `directory`; 0 if none was ever recorded.

    Raises ProtocolError if the file is malformed.
    """
    path = directory / LOG_START_OFFSET_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    if len(lines) != 2 or lines[0] != str(_VERSION):
        raise ProtocolError(f"{path}: expected a version line '{_VERSION}' and an offset line")
    try:
        offset = int(lines[1])
    except ValueError as exc:
        raise ProtocolError(f"{path}: line 2: expected an integer offset") from exc
    if offset < 0:
        raise ProtocolError(f"{path}: line 2: negative offset {offset}")
    return offset
