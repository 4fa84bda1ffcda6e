"""One connection's answers, written in the order its requests arrived, while the waits of
those requests overlap.

Kafka's clients send ahead (an idempotent producer keeps up to five requests in flight on
a connection) and match answers to requests by order as well as by correlation id, so
answers must leave in request order. Handling a request on the event loop (its checks,
decoding, the append) is done by the connection's task in arrival order: a producer's
batches are appended in the order it sent them, and a login step changes the phase
before the next request is looked at. What is left of a request after that is a wait (an
acks=all produce waiting for the HW): its Answer carries a `later` task, and the
connection goes on reading and handling the next requests while it runs. So five acks=all
batches of one producer wait for their replication together instead of one after the
other, the difference between one replication round trip per five batches and one per
batch.

At most MAX_IN_FLIGHT requests of a connection are unanswered at once: the connection
reads no further frame until the oldest is answered, so a client that never reads its
answers holds a bounded number of requests (and their share of the request budget).
An answer that is ready while nothing is queued ahead of it is written at once by the
connection's task; others are written by a writer task that awaits each in turn.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from brokerd.serving.answer import Answer
from spark_replica.errors import ConnectionLostError
from spark_replica.transport import Frame, FrameStream

logger = logging.getLogger("brokerd.server")

# Requests of one connection taken and not yet answered: Kafka's
# max.in.flight.requests.per.connection for idempotent producers.
MAX_IN_FLIGHT = 5


@dataclass(slots=True, eq=False)
class Unanswered:
    """A request taken from the connection, and its answer (ready, or `later`)."""

    frame: Frame
    api_key: int
    arrived: float
    answer: Answer


class AnswerOrder:
    """Writes a connection's answers in request order (see the module's docstring).

    `on_done(request, written)` is called once per request, when its answer was written
    (True) or will never be (False): the server gives back the frame's budget there.
    """

    def __init__(self, stream: FrameStream, on_done: Callable[[Unanswered, bool], None]) -> None:
        self._stream = stream
        self._on_done = on_done
        self._queue: collections.deque[Unanswered] = collections.deque()
        self._writer: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._ended: BaseException | None = None  # no more answers can be written

    async def room(self) -> None:
        """Return once another request may be taken; raise once answers can no longer be
        written (the connection failed, or an answer ended it)."""
        while self._ended is None and len(self._queue) >= MAX_IN_FLIGHT:
            self._changed.clear()
            await self._changed.wait()
        if self._ended is not None:
            raise self._ended

    async def put(self, request: Unanswered) -> None:
        """Write the request's answer in its turn: now, when it is ready and nothing is
        ahead of it, else by the writer task."""
        if self._ended is not None:
            self._drop(request)
            raise self._ended
        if not self._queue and request.answer.later is None:
            try:
                await self._send(request)
            except BaseException:
                self._on_done(request, False)
                raise
            self._on_done(request, True)
            await self._maybe_end(request.answer)
            return
        self._queue.append(request)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_queued())

    async def drain(self) -> None:
        """Return once every answer queued is written; raise if they cannot be."""
        while self._ended is None and self._queue:
            self._changed.clear()
            await self._changed.wait()
        if self._ended is not None:
            raise self._ended

    def abandon(self) -> None:
        """The connection is over: stop writing, cancel the waits, give back the frames."""
        if self._ended is None:
            self._ended = ConnectionLostError("the connection is closed")
        if self._writer is not None:
            self._writer.cancel()
        while self._queue:
            self._drop(self._queue.popleft())
        self._changed.set()

    async def _write_queued(self) -> None:
        """Write the queued answers in order. Whoever takes a request off the queue
        reports it done, once: here once it is answered or failed, abandon() otherwise
        (a cancelled write leaves its request queued for it)."""
        try:
            while self._queue and self._ended is None:
                request = self._queue[0]
                try:
                    await self._send(request)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._queue.popleft()
                    self._on_done(request, False)
                    if not isinstance(exc, ConnectionLostError):
                        logger.exception("cannot answer a request of %s", self._stream.peer)
                        exc = ConnectionLostError(f"answering failed: {exc!r}")
                    self._end(exc)
                    return
                self._queue.popleft()
                self._on_done(request, True)
                self._changed.set()
                await self._maybe_end(request.answer)
        finally:
            self._writer = None

    async def _send(self, request: Unanswered) -> None:
        """Wait for the request's answer and write it."""
        answer = request.answer
        if answer.later is not None:
            answer = request.answer = await answer.later
        if answer.buffers is not None:
            await self._stream.write(answer.buffers)

    async def _maybe_end(self, answer: Answer) -> None:
        """End the connection after an answer that says so, after its delay."""
        if answer.close_after_s is not None:
            await asyncio.sleep(answer.close_after_s)
            self._end(ConnectionLostError("the answer ended the connection"))

    def _end(self, error: BaseException) -> None:
        """No more answers: the connection's task stops reading and closes it."""
        if self._ended is None:
            self._ended = error
        self._changed.set()
        self._stream.close()

    def _drop(self, request: Unanswered) -> None:
        later = request.answer.later
        if later is not None and not later.done():
            later.cancel()
        elif later is not None and not later.cancelled():
            with contextlib.suppress(BaseException):
                later.exception()  # retrieved: nobody will write it
        self._on_done(request, False)
