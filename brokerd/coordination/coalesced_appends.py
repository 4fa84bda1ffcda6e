"""Appends to one offsets partition, coalesced: what the groups of a partition ask to
store in one turn of the event loop goes out as one batch, as Kafka's coordinator
batches its appends.

Each append of the offsets topic costs the same whatever it holds (an Arrow batch, a log
append, a round of every follower's fetch), and commits come in waves: the commits
answered by one high-watermark advance are answered together, and their consumers send
the next ones together. One batch for a wave takes each of those costs once. Every
caller is answered by its batch's outcome; a group's own appends stay in the order it
asked, because the coordinator sends a group's next only once its last is answered.
A batch holds at most MAX_RECORDS records, so one large commit does not make its
neighbours' batch too large to store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from spark_replica.errors import BrokerResponseError

Record = tuple[bytes, bytes | None]
MAX_RECORDS = 1000


class CoalescedAppends:
    def __init__(self, write: Callable[[list[Record]], Awaitable[None]]) -> None:
        self._write = write
        self._waiting: list[tuple[Sequence[Record], asyncio.Future[None]]] = []
        self._waiting_records = 0
        self._scheduled = False
        self._writes: set[asyncio.Task[None]] = set()

    async def append(self, records: Sequence[Record]) -> None:
        """Return once `records` are stored with the others of their batch; raise the
        batch's error if it failed."""
        loop = asyncio.get_running_loop()
        if self._waiting and self._waiting_records + len(records) > MAX_RECORDS:
            self._flush()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append((records, future))
        self._waiting_records += len(records)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        await future

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._waiting, self._waiting_records = self._waiting, [], 0
        if not batch:
            return
        write = asyncio.get_running_loop().create_task(self._write_batch(batch))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def _write_batch(
        self, batch: list[tuple[Sequence[Record], asyncio.Future[None]]]
    ) -> None:
        try:
            await self._write([record for records, _ in batch for record in records])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # each caller gets its own copy of a typed error
            for _, future in batch:
                if not future.done():
                    copy = type(exc)(str(exc)) if isinstance(exc, BrokerResponseError) else exc
                    future.set_exception(copy)
            return
        for _, future in batch:
            if not future.done():
                future.set_result(None)
