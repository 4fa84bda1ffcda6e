"""A progress display for CLI waits: a spinner on standard error that says what is awaited.

It shows only on a terminal and only once the wait has lasted a second, so quick commands
and scripts (pipes, CI) print nothing extra; the final outcome is still printed by the
command itself.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from rich.console import Console
from rich.status import Status

SHOW_AFTER_S = 1.0


class Waiting:
    """Handle on a running display; `update` changes the text (e.g. '2 of 3 brokers up')."""

    def __init__(self, status: Status | None) -> None:
        self._status = status

    def update(self, description: str) -> None:
        if self._status is not None:
            self._status.update(description)


@contextlib.contextmanager
def waiting(description: str) -> Iterator[Waiting]:
    """Show `description` with a spinner while the block runs (on a terminal only)."""
    console = Console(file=sys.stderr)
    if not console.is_terminal:
        yield Waiting(None)
        return
    status = Status(description, console=console)
    with contextlib.ExitStack() as stack:
        timer = _DelayedStart(status)
        stack.callback(timer.stop)
        yield Waiting(status)


class _DelayedStart:
    """Starts the spinner after SHOW_AFTER_S, from rich's own refresh thread, so that a
    wait shorter than that leaves the terminal untouched."""

    def __init__(self, status: Status) -> None:
        self._status = status
        self._started = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(SHOW_AFTER_S, self._start)
        self._timer.daemon = True
        self._timer.start()

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._status.start()

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            if self._started:
                self._status.stop()
            self._started = True
