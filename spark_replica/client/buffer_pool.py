"""How much a producer holds for records not yet acknowledged: Kafka's buffer.memory.

The client's one back-pressure point: the Producer's sends and the Spark sink's write
tasks (for batches they give the client) both wait for room here (`reserve`).

Without a bound, an application that sends faster than the brokers store (or while
they do not answer at all) grows its queue, and its memory, until it dies. Each record
reserves its estimated size here when it is sent and gives it back when its batch is
finished (acknowledged or failed for good); a send that finds too little left waits
for releases, up to max.block.ms, then fails with a BufferExhaustedError.

This is accounting only: the records themselves live in their batches. A record larger
than the whole buffer could never fit, so it is refused at once rather than waiting
for nothing.

Ownership: the pool belongs to one Producer (or one write task) and is changed only on
its event loop (the SyncProducer hands its records to that loop before they reserve).
Listeners run there too, after each release; the SyncProducer's wakes its caller thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from spark_replica.errors import BufferExhaustedError, ConfigError, MessageTooLargeError


class BufferPool:
    def __init__(self, limit_bytes: int) -> None:
        if limit_bytes <= 0:
            raise ConfigError(f"buffer_memory must be positive, not {limit_bytes}")
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._peak_before_release = 0
        self._listeners: list[Callable[[], None]] = []
        self._changed = asyncio.Event()  # set by each release (and by `interrupt`)

    @property
    def peak_bytes(self) -> int:
        """The most ever reserved at once, for benchmarks and tests."""
        return max(self._peak_before_release, self.used_bytes)

    def check_fits(self, size_bytes: int) -> None:
        """Refuse a record that is larger than the whole buffer: waiting cannot help."""
        if size_bytes > self.limit_bytes:
            raise MessageTooLargeError(
                f"a record of about {size_bytes} bytes is larger than buffer.memory "
                f"(buffer_memory={self.limit_bytes} bytes); raise buffer_memory"
            )

    def try_reserve(self, size_bytes: int) -> bool:
        """Reserve `size_bytes` if they are free now; False (nothing reserved) if not."""
        used = self.used_bytes + size_bytes
        if used > self.limit_bytes:
            return False
        self.used_bytes = used
        return True

    def release(self, size_bytes: int) -> None:
        """Give back what a finished batch held, and tell the listeners.

        The peak is taken here: the reserved total only grows between two releases.
        """
        self._peak_before_release = max(self._peak_before_release, self.used_bytes)
        self.used_bytes -= size_bytes
        self._changed.set()
        for listener in self._listeners:
            listener()

    def interrupt(self) -> None:
        """Wake whoever waits in `reserve`, to run its `check` again (e.g. after a failure)."""
        self._changed.set()

    async def reserve(
        self,
        size_bytes: int,
        deadline: float | None = None,
        check: Callable[[], None] | None = None,
    ) -> bool:
        """Reserve `size_bytes`, waiting for releases until the loop time `deadline` (None:
        for as long as it takes); False, with nothing reserved, if the deadline passed.

        `check`, if given, runs before each try and may raise to give up the wait.
        """
        loop = asyncio.get_running_loop()
        while True:
            if check is not None:
                check()
            if self.try_reserve(size_bytes):
                return True
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                continue

    def add_listener(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)


def exhausted_error(size_bytes: int, limit_bytes: int, max_block_ms: int) -> BufferExhaustedError:
    """The error for a send that waited max_block_ms for room and found none."""
    return BufferExhaustedError(
        f"no room for a record of about {size_bytes} bytes in buffer.memory "
        f"(buffer_memory={limit_bytes} bytes) after waiting max_block_ms={max_block_ms}: "
        "records are sent faster than the brokers acknowledge them (or they do not "
        "answer); slow down, or raise buffer_memory or max_block_ms"
    )
