"""A consumer for code that does not use asyncio.

`SyncConsumer` runs an asyncio `Consumer` on an event loop of its own, on a daemon
thread, and waits for it. Each poll round crosses threads once; iteration then hands out
that round's records on the caller's thread, so the cross-thread cost is per round, not
per record.

Who touches the consumer's state: the loop thread while a call submitted to it runs
(the caller is waiting for it then), the caller's thread otherwise (assign, seek, and
the position updates of iteration). The two never run at once as long as one thread at
a time uses a `SyncConsumer`, which, as Kafka's consumer, is not safe to share between
threads.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Iterable, Iterator
from itertools import chain
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from spark_replica.errors import ClientClosedError

from .cluster import Cluster, parse_bootstrap
from .consumer import Consumer, ConsumerConfig, FetchedRecords
from .consumer_records import (
    ConsumerRecord,
    IdleTimer,
    deliver,
    iter_records,
    require_assignment,
)
from .loop_thread import LoopThread

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig
    from spark_replica.topics import TopicPartition

T = TypeVar("T")
# How long close() waits for the loop thread to finish closing connections.
CLOSE_TIMEOUT_S = 10.0


class SyncConsumer:
    """Reads records without asyncio: `for record in consumer`, `poll`, Arrow batches.

    ```python
    with SyncConsumer("localhost:9092") as consumer:
        consumer.assign_topic("events")
        consumer.seek_to_beginning()
        for record in consumer:
            print(record.offset, record.value)
    ```

    `bootstrap` is "host:port,host:port" or a list of (host, port) pairs.
    """

    def __init__(
        self,
        bootstrap: str | Iterable[tuple[str, int]],
        config: ConsumerConfig | None = None,
        *,
        client_id: str = "replog",
        security: SecurityConfig | None = None,
    ) -> None:
        addresses = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        self._thread: LoopThread | None = LoopThread(f"replog-consumer-{client_id}")
        self._consumer = self._thread.call(_make_consumer(addresses, client_id, security, config))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._running()
        self._consumer.assign(list(partitions))

    def assign_topic(self, topic: str) -> list[TopicPartition]:
        """Assign every partition of `topic` (added to those already assigned)."""
        return self._call(self._consumer.assign_topic(topic))

    def assignment(self) -> list[TopicPartition]:
        return list(self._consumer.positions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._running()
        self._consumer.seek(tp, offset)

    def seek_to_beginning(self, partitions: list[TopicPartition] | None = None) -> None:
        self._call(self._consumer.seek_to_beginning(partitions))

    def seek_to_end(self, partitions: list[TopicPartition] | None = None) -> None:
        self._call(self._consumer.seek_to_end(partitions))

    def position(self, tp: TopicPartition) -> int:
        return self._consumer.position(tp)

    def poll(self, timeout: float | None = None) -> list[ConsumerRecord]:
        """The records of one fetch round, waiting up to `timeout` seconds for some.

        Positions move past every record returned, as Kafka's `poll` does. None waits
        the consumer's `max_wait_ms`.
        """
        return list(chain.from_iterable(map(iter_records, self.poll_batches(timeout))))

    def poll_batches(self, timeout: float | None = None) -> list[FetchedRecords]:
        """As `poll`, but the records stay in Arrow batches (no per-record objects)."""
        self._running()
        require_assignment(self._consumer)
        max_wait_ms = None if timeout is None else max(0, round(timeout * 1000))
        return self._call(self._consumer.poll(max_wait_ms))

    def records(self, *, idle_timeout_s: float | None = None) -> Iterator[ConsumerRecord]:
        """Records one at a time, fetching a round whenever the last one is used up.

        Breaking out and iterating again resumes at the next record. Without
        `idle_timeout_s` this waits for new records for ever; with it, it ends once none
        has arrived for that long.
        """
        idle = IdleTimer(idle_timeout_s, time.monotonic())
        while True:
            self._running()
            require_assignment(self._consumer)
            fetched = self._call(self._consumer.poll())
            if idle.expired(fetched, time.monotonic()):
                return
            yield from deliver(self._consumer, fetched)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self.records()

    def close(self) -> None:
        """Close the connections and stop the loop thread; later calls raise ClientClosedError."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            thread.call(self._consumer.cluster.close())
        finally:
            thread.stop(CLOSE_TIMEOUT_S)

    def __enter__(self) -> SyncConsumer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        thread = self._thread
        if thread is None:
            work.close()
            raise ClientClosedError("this consumer is closed")
        return thread.call(work)

    def _running(self) -> None:
        if self._thread is None:
            raise ClientClosedError("this consumer is closed")


async def _make_consumer(
    bootstrap: list[tuple[str, int]],
    client_id: str,
    security: SecurityConfig | None,
    config: ConsumerConfig | None,
) -> Consumer:
    """Built on the loop thread, so that everything asyncio in it belongs to that loop."""
    return Consumer(Cluster(bootstrap, client_id=client_id, security=security), config)
