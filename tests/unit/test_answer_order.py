"""AnswerOrder's rules on their own: answers leave in request order whatever order they
become ready in, at most MAX_IN_FLIGHT wait unanswered, and an abandoned connection
cancels its waits and gives every frame back. A stand-in stream records what is written;
tests/integration/test_pipelined_connection.py checks the same through real brokers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokerd.serving.answer import Answer
from brokerd.serving.answer_order import MAX_IN_FLIGHT, AnswerOrder, Unanswered
from spark_replica.errors import ConnectionLostError


class RecordingStream:
    peer = ("127.0.0.1", 1)

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    async def write(self, buffers: list[Any]) -> None:
        if self.closed:
            raise ConnectionLostError("closed")
        self.written.append(b"".join(buffers))

    def close(self) -> None:
        self.closed = True


def _run(test: Any) -> None:
    asyncio.run(asyncio.wait_for(test(), 5))


def _order(stream: RecordingStream, done: list[tuple[bytes, bool]]) -> AnswerOrder:
    def on_done(request: Unanswered, written: bool) -> None:
        done.append((bytes(request.frame), written))

    return AnswerOrder(stream, on_done)  # type: ignore[arg-type]


def test_answers_leave_in_request_order_whatever_order_they_are_ready_in() -> None:
    async def test() -> None:
        stream, done = RecordingStream(), []
        answers = _order(stream, done)
        slow: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        await answers.put(Unanswered(bytearray(b"1"), 0, 0.0, Answer(None, later=slow)))
        await answers.put(Unanswered(bytearray(b"2"), 0, 0.0, Answer([b"two"])))
        await asyncio.sleep(0)
        assert stream.written == []  # the ready answer waits behind the slow one
        slow.set_result(Answer([b"one"]))
        await answers.drain()
        assert stream.written == [b"one", b"two"]
        assert done == [(b"1", True), (b"2", True)]

    _run(test)


def test_a_ready_answer_with_nothing_ahead_is_written_at_once() -> None:
    async def test() -> None:
        stream, done = RecordingStream(), []
        answers = _order(stream, done)
        await answers.put(Unanswered(bytearray(b"1"), 0, 0.0, Answer([b"one"])))
        assert stream.written == [b"one"] and done == [(b"1", True)]

    _run(test)


def test_no_more_than_the_bound_wait_unanswered() -> None:
    async def test() -> None:
        stream, done = RecordingStream(), []
        answers = _order(stream, done)
        loop = asyncio.get_running_loop()
        waits = [loop.create_future() for _ in range(MAX_IN_FLIGHT)]
        for i, wait in enumerate(waits):
            await answers.room()
            await answers.put(Unanswered(bytearray([i]), 0, 0.0, Answer(None, later=wait)))
        room = asyncio.ensure_future(answers.room())
        await asyncio.sleep(0.01)
        assert not room.done()
        waits[0].set_result(Answer([b"first"]))
        await asyncio.wait_for(room, 1)
        assert stream.written == [b"first"]
        answers.abandon()

    _run(test)


def test_an_abandoned_connection_cancels_its_waits_and_gives_every_frame_back() -> None:
    async def test() -> None:
        stream, done = RecordingStream(), []
        answers = _order(stream, done)
        wait: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        await answers.put(Unanswered(bytearray(b"1"), 0, 0.0, Answer(None, later=wait)))
        await answers.put(Unanswered(bytearray(b"2"), 0, 0.0, Answer([b"two"])))
        await asyncio.sleep(0)
        answers.abandon()
        await asyncio.sleep(0)
        assert wait.cancelled()
        assert sorted(done) == [(b"1", False), (b"2", False)]
        with pytest.raises(ConnectionLostError):
            await answers.room()

    _run(test)


def test_an_answer_that_ends_the_connection_stops_the_ones_behind_it() -> None:
    async def test() -> None:
        stream, done = RecordingStream(), []
        answers = _order(stream, done)
        failed: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        await answers.put(Unanswered(bytearray(b"1"), 0, 0.0, Answer(None, later=failed)))
        await answers.put(Unanswered(bytearray(b"2"), 0, 0.0, Answer([b"two"])))
        failed.set_result(Answer(None, 0.0))  # a handler that failed: close, answer nothing
        with pytest.raises(ConnectionLostError):
            await answers.drain()
        assert stream.closed and stream.written == []
        answers.abandon()
        assert done == [(b"1", True), (b"2", False)]

    _run(test)
