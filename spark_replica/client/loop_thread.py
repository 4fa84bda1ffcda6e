"""An asyncio event loop on a daemon thread, for the client's synchronous facades.

SyncProducer and SyncConsumer both keep an asyncio client on a loop of its own, on a
thread of its own, and wait for work submitted to it from the caller's thread. This is
that thread: start it, run a coroutine on it and wait, wake it, stop it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running on a daemon thread, and a way to wait for work on it."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def is_current(self) -> bool:
        """Whether the caller runs on this loop's thread (a callback of the client)."""
        return threading.current_thread() is self._thread

    def call(self, work: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `work` on the loop and wait for its result (its exception is raised here).

        If the wait ends early (the timeout, or e.g. KeyboardInterrupt in the caller),
        the work is cancelled too, and TimeoutError or the interruption is raised.
        """
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result(timeout_s)
        except BaseException:
            future.cancel()
            raise

    def wake(self, callback: Callable[[], object]) -> None:
        """Run `callback` on the loop's thread soon (safe from any thread)."""
        self.loop.call_soon_threadsafe(callback)

    def stop(self, timeout_s: float | None) -> None:
        """Stop the loop and wait up to `timeout_s` for its thread; close it once ended."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self.loop.close()
