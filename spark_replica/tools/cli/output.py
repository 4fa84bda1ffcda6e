"""How CLI listings are printed: a `rich` table for people, or JSON for scripts.

Every listing command takes `--json`; its JSON form is the same rows as objects keyed by
column name (or a richer document the command builds), one document on standard output,
so that `jq` and scripts never parse the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document instead of a table (default: a table)",
    )


def stdout_console() -> Console:
    """A console on standard output that never wraps a table into a pipe's 80 columns."""
    return Console(file=sys.stdout, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def print_json(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def cell(value: object) -> str:
    """How one value reads in a table: lists joined by commas, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value)
    return str(value)


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    title: str | None = None,
    highlight: Sequence[bool] | None = None,
) -> None:
    """A table with one header row; rows whose `highlight` flag is set print in red
    (an under-replicated partition, a dead broker)."""
    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    for index, row in enumerate(rows):
        style = "red" if highlight is not None and highlight[index] else None
        table.add_row(*(Text(cell(value)) for value in row), style=style)
    stdout_console().print(table)


def rows_as_json(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[dict]:
    return [dict(zip(columns, row, strict=True)) for row in rows]
