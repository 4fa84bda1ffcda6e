"""Offset checkpoint files: round trip, atomic replacement, and rejection of bad content."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.log import HW_CHECKPOINT_FILE, read_offsets_checkpoint, write_offsets_checkpoint
from spark_replica.errors import ProtocolError


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    offsets = {("orders", 0): 42, ("orders", 1): 0, ("a.b-c_d", 7): 10**12}
    write_offsets_checkpoint(path, offsets)
    assert read_offsets_checkpoint(path) == offsets
    assert path.read_text().splitlines()[:2] == ["0", "3"]
    assert not path.with_name(path.name + ".tmp").exists()


def test_rewrite_replaces_the_old_content(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    write_offsets_checkpoint(path, {("t", 0): 1, ("t", 1): 2})
    write_offsets_checkpoint(path, {("t", 0): 5})
    assert read_offsets_checkpoint(path) == {("t", 0): 5}


def test_empty_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    write_offsets_checkpoint(path, {})
    assert read_offsets_checkpoint(path) == {}


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_offsets_checkpoint(tmp_path / HW_CHECKPOINT_FILE) == {}


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("", 1),
        ("1\n0\n", 1),
        ("0\n", 2),
        ("0\n2\nt 0 1\n", 2),
        ("0\n1\nt 0\n", 3),
        ("0\n2\nt 0 1\nt x 1\n", 4),
        ("0\n2\nt 0 1\nt 0 2\n", 4),
    ],
)
def test_malformed_file_names_the_line(tmp_path: Path, content: str, line: int) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    path.write_text(content)
    with pytest.raises(ProtocolError, match=f"line {line}:"):
        read_offsets_checkpoint(path)
