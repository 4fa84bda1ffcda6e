"""How CLI listings are printed: a `rich` table for people, or JSON for scripts.

Every listing command takes `--json`; its JSON form is the same rows as objects keyed by
column name (or a richer document the command builds), one document on standard output,
so that `jq` and scripts never parse the table. Streams (consume's `--format json`)
print JSON lines instead: one object a line, each a document of its own.

Output may go to a reader that stops early (`| head -1`): main() ends the command
quietly then, with stdout_closed() telling a closed pipe from other broken ones.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import select
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


class _PipeConsole(Console):
    """rich exits 1 on its own when its reader goes; the broken pipe is main()'s to
    decide, the same for a table as for every other output."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def stdout_console() -> Console:
    """A console on standard output that never wraps a table into a pipe's 80 columns."""
    return _PipeConsole(file=sys.stdout, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def print_json(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def stdout_closed() -> bool:
    """Whether whoever read standard output has gone (`| head -1` has what it wanted).

    A pipe whose reader closed it reports an error to poll at once, so a command that
    prints only now and then (consume on a quiet topic) learns it before its next write.
    """
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def silence_stdout() -> None:
    """Point standard output at the null device, as Python's signal docs advise after a
    broken pipe: the interpreter's last flush at exit then has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def plural(count: int, noun: str) -> str:
    """`1 record`, `2 records`: counts in messages read as English."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


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
