"""How much a producer holds for records not yet acknowledged: Kafka's buffer.memory.

Without a bound, an application that sends faster than the brokers store (or while
they do not answer at all) grows its queue, and its memory, until it dies. Each record
reserves its estimated size here when it is sent and gives it back when its batch is
finished (acknowledged or failed for good); a send that finds too little left waits
for releases, up to max.block.ms, then fails with a BufferExhaustedError.

This is accounting only: the records themselves live in their batches. A record larger
than the whole buffer could never fit, so it is refused at once rather than waiting
for nothing.

Ownership: the pool belongs to one Producer and is changed only on its event loop
(the SyncProducer hands its records to that loop before they reserve). `on_release`
listeners run there too, after each release; a listener wakes whoever waits.
"""

from __future__ import annotations

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
        for listener in self._listeners:
            listener()

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
