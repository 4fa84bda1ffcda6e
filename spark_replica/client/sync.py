"""A producer for code that does not use asyncio: SyncProducer.

It runs an asyncio Producer on a background thread (its I/O thread) with its own event
loop. `send` is called on the caller's thread and returns once the record is taken; it
blocks while buffer.memory is full, up to max_block_ms, then raises
BufferExhaustedError, as Kafka's Java producer does.

Records cross threads in bulk: `send` appends to a list under a lock and wakes the I/O
thread only when the list was empty, so a caller sending in a loop pays for one
cross-thread wake-up per batch of records rather than one per record. The I/O thread
takes the whole list at once and sends its records in order.

Memory: a record counts against buffer_memory from the moment `send` takes it. The
caller's thread counts the bytes handed over and not yet taken by the I/O thread
(`_handed_bytes`) on top of what the Producer's pool holds, and waits while their sum
would pass the limit; the pool tells it when memory is released. A list being sent is
counted in both until it is done, which errs on the side of waiting.

Ownership: `_pending` and `_handed_bytes` are guarded by `_lock` (`_room` waits on it);
everything else of the Producer and Cluster lives on the I/O thread's loop. Delivery
callbacks run on the I/O thread: they must be quick and must not call `flush`/`close`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from spark_replica.errors import ClientClosedError, ConfigError, ReplogError, TimeoutExpiredError
from spark_replica.security.settings import SecurityConfig
from spark_replica.wire.native.metadata import TopicMetadata

from .accumulator import RECORD_OVERHEAD_BYTES, Headers, estimate_record_bytes
from .buffer_pool import exhausted_error
from .cluster import Cluster, parse_bootstrap
from .loop_thread import LoopThread
from .producer import DeliveryCallback, Producer, ProducerConfig, RecordMetadata, as_bytes

logger = logging.getLogger("spark_replica.client.producer")

# What the I/O thread is handed: a record (topic, value, key, partition, timestamp,
# headers, callback, size) or a flush request answered through its future.
_Record = tuple[str, bytes | None, bytes | None, int | None, int, Headers | None, Any, int]


class _Flush:
    """A marker in the hand-over list: flush everything before it, then say so."""

    def __init__(self) -> None:
        self.done: concurrent.futures.Future[None] = concurrent.futures.Future()


class SyncProducer:
    """Sends records from any thread without asyncio; `with SyncProducer(...) as p:`.

    `bootstrap` is "host:port,host:port" or a list of (host, port). `send` takes one
    record (its outcome goes to `on_delivery(metadata, error)`, called on the I/O
    thread); `send_future` returns a concurrent.futures.Future instead; `flush`
    waits for every record sent so far; `close` flushes and stops the I/O thread.
    """

    def __init__(
        self,
        bootstrap: str | Iterable[tuple[str, int]],
        config: ProducerConfig | None = None,
        *,
        client_id: str = "replog",
        security: SecurityConfig | None = None,
    ) -> None:
        self.config = config or ProducerConfig()
        addresses = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        self._lock = threading.Lock()  # a plain lock: taken once per record
        self._room = threading.Condition(self._lock)
        self._pending: list[_Record | _Flush] = []
        self._handed_bytes = 0
        self._closed = False
        self._thread = LoopThread("replog-producer-io")
        self._cluster = Cluster(addresses, client_id=client_id, security=security)
        self._wake = asyncio.Event()  # set on the I/O thread only
        self._producer, self._drainer = self._thread.call(self._start())

    async def _start(self) -> tuple[Producer, asyncio.Task[None]]:
        producer = Producer(self._cluster, self.config)
        producer.pool.add_listener(self._memory_released)
        return producer, asyncio.create_task(self._drain(producer), name="replog-sync-producer")

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Take one record; blocks only while buffer.memory is full or metadata unknown.

        Raises, with the record not taken: ConfigError (a bad partition, value or
        key), BufferExhaustedError after max_block_ms, the topic's error,
        ClientClosedError once closed. Later failures go to `on_delivery`.
        """
        data = value if isinstance(value, bytes) else as_bytes(value, "value")
        key_data = key if key is None or isinstance(key, bytes) else as_bytes(key, "key")
        if key_data is None and headers is None:
            size = RECORD_OVERHEAD_BYTES + len(data or b"")
        else:
            size = estimate_record_bytes(data, key_data, headers)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        metadata = self._cluster.topics.get(topic)
        if metadata is None or metadata.error_code:
            metadata = self._metadata(topic)
        if partition is not None and not 0 <= partition < len(metadata.partitions):
            raise ConfigError(
                f"topic {topic!r} has partitions 0..{len(metadata.partitions) - 1}, not {partition}"
            )
        self._hand_over(
            (topic, data, key_data, partition, timestamp_ms, headers, on_delivery, size), size
        )

    def send_future(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """`send`, returning a future for the record's metadata (one object per record)."""
        future: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()

        def delivered(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            if error is not None:
                future.set_exception(error)
            elif metadata is not None:
                future.set_result(metadata)

        self.send(topic, value, key, partition, timestamp_ms, headers, on_delivery=delivered)
        return future

    def _metadata(self, topic: str) -> TopicMetadata:
        """Wait here for a topic's metadata, up to max_block_ms (Kafka's rule for send)."""
        if self._on_io_thread():
            raise TimeoutExpiredError(
                f"no metadata for topic {topic!r} yet, and a delivery callback cannot wait for it"
            )
        try:
            return self._thread.call(
                self._cluster.ensure_topic(topic), self.config.max_block_ms / 1000
            )
        except TimeoutError:
            raise TimeoutExpiredError(
                f"no metadata for topic {topic!r} within max_block_ms={self.config.max_block_ms}"
            ) from None

    def _hand_over(self, item: _Record | _Flush, size: int) -> None:
        """Queue `item` for the I/O thread once `size` more bytes fit in buffer.memory."""
        limit = self.config.buffer_memory
        with self._lock:
            if self._closed:
                raise ClientClosedError("the producer is closed; create a new one to send more")
            if self._producer.pool.used_bytes + self._handed_bytes + size > limit:
                self._wait_for_room(size)
            self._pending.append(item)
            self._handed_bytes += size
            wake = len(self._pending) == 1
        if wake:
            self._thread.wake(self._wake.set)

    def _wait_for_room(self, size: int) -> None:
        """Wait (holding `_lock`, which waiting releases) until `size` bytes fit."""
        pool = self._producer.pool
        pool.check_fits(size)
        if self._on_io_thread():  # a callback sending: waiting there would wait for ever
            raise exhausted_error(size, pool.limit_bytes, 0)
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while pool.used_bytes + self._handed_bytes + size > pool.limit_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise exhausted_error(size, pool.limit_bytes, self.config.max_block_ms)
            self._room.wait(left)

    def _memory_released(self) -> None:
        with self._lock:
            self._room.notify_all()

    async def _drain(self, producer: Producer) -> None:
        """On the I/O thread: send what the callers handed over, in order, list by list."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while True:
                with self._lock:
                    items, self._pending = self._pending, []
                if not items:
                    break
                handed = 0
                send = producer.send
                for item in items:
                    if isinstance(item, _Flush):
                        await _flush_for(producer, item)
                        continue
                    topic, value, key, partition, timestamp_ms, headers, callback, size = item
                    handed += size
                    try:
                        await send(
                            topic,
                            value,
                            key,
                            partition,
                            timestamp_ms,
                            headers,
                            on_delivery=callback,
                        )
                    except Exception as exc:  # taken by `send` already: tell its callback
                        _report_unsent(topic, callback, exc)
                with self._lock:
                    self._handed_bytes -= handed
                    self._room.notify_all()

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every record sent so far is answered (or failed, to its callback)."""
        self._refuse_on_io_thread()
        request = _Flush()
        self._hand_over(request, 0)
        request.done.result(timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        """Flush, then stop the I/O thread; sends after this raise. Safe to call twice.

        The final flush is queued in the same step that closes, so no record sent from
        another thread can land behind it and be dropped.
        """
        self._refuse_on_io_thread()
        request = _Flush()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._pending.append(request)
            wake = len(self._pending) == 1
        if wake:
            self._thread.wake(self._wake.set)
        try:
            request.done.result(timeout_s)
        finally:
            self._thread.call(self._shut_down(), timeout_s)
            self._thread.stop(timeout_s)

    async def _shut_down(self) -> None:
        self._drainer.cancel()
        await asyncio.wait({self._drainer})
        await self._producer.close()
        await self._cluster.close()

    def _on_io_thread(self) -> bool:
        return self._thread.is_current()

    def _refuse_on_io_thread(self) -> None:
        if self._on_io_thread():
            raise ReplogError("flush and close wait for the I/O thread: not from a callback")


def _report_unsent(topic: str, callback: DeliveryCallback | None, error: Exception) -> None:
    if callback is None:
        logger.error("%s: a record was not sent: %s", topic, error)
    else:
        callback(None, error)


async def _flush_for(producer: Producer, request: _Flush) -> None:
    try:
        await producer.flush()
    except BaseException as exc:
        request.done.set_exception(exc)
        raise
    request.done.set_result(None)
