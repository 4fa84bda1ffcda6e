"""FrameProtocol's parsing: frames come out whole and in order however the bytes arrive.

A server's connections also share one budget of request bytes, charged as bytes arrive:
frames wait for it, unread; partial frames never deadlock it; one connection holds at
most its share.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_replica.errors import ConnectionLostError, ProtocolError
from spark_replica.transport import (
    CHARGE_STEP_BYTES,
    SCRATCH_BYTES,
    FrameProtocol,
    OversizedFrame,
    RequestBudget,
)


class RecordingTransport(asyncio.Transport):
    """Just enough of a transport for the protocol's flow control calls."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.closed = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def feed(protocol: FrameProtocol, data: bytes, cuts: list[int]) -> None:
    """Deliver `data` to the protocol in pieces ending at `cuts`, as a socket would."""
    position = 0
    for end in [*sorted(set(cuts)), len(data)]:
        while position < end:
            buffer = protocol.get_buffer(-1)
            n = min(len(buffer), end - position)
            buffer[:n] = data[position : position + n]
            protocol.buffer_updated(n)
            position += n


def frames_of(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


async def drain(protocol: FrameProtocol, count: int) -> list[bytearray | OversizedFrame]:
    return [await protocol.next_frame() for _ in range(count)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(min_size=1, max_size=300),
            st.integers(min_value=SCRATCH_BYTES - 10, max_value=SCRATCH_BYTES * 3).map(
                lambda n: bytes([n % 251]) * n
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(min_value=0, max_value=4 * SCRATCH_BYTES), max_size=12),
    st.booleans(),
)
def test_frames_survive_any_split(payloads: list[bytes], cuts: list[int], charged: bool) -> None:
    """With a budget too: a large frame charged step by step arrives whole all the same."""

    async def scenario() -> list[bytearray | OversizedFrame]:
        budget = RequestBudget(100 * SCRATCH_BYTES) if charged else None
        protocol = FrameProtocol(max_frame_bytes=10 * SCRATCH_BYTES, budget=budget)
        protocol.set_limits(10 * SCRATCH_BYTES, 100 * SCRATCH_BYTES)  # feed() never pauses
        protocol.connection_made(RecordingTransport())
        data = frames_of(payloads)
        feed(protocol, data, [c for c in cuts if c < len(data)])
        frames = await drain(protocol, len(payloads))
        assert budget is None or budget.used == len(data) - 4 * len(payloads)
        return frames

    assert [bytes(f) for f in asyncio.run(scenario())] == payloads  # type: ignore[arg-type]


def test_oversized_frame_gives_its_head_then_ends_the_stream() -> None:
    async def scenario() -> None:
        protocol = FrameProtocol(max_frame_bytes=100, head_bytes_of_oversized=8)
        transport = RecordingTransport()
        protocol.connection_made(transport)
        feed(protocol, frames_of([b"ok"]) + struct.pack(">i", 5000) + b"12345678rest", [])
        assert await protocol.next_frame() == bytearray(b"ok")
        oversized = await protocol.next_frame()
        assert oversized == OversizedFrame(5000, b"12345678")
        assert transport.paused
        with pytest.raises(ProtocolError, match="over the limit"):
            await protocol.next_frame()

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [0, -1])
def test_non_positive_size_ends_the_stream_after_earlier_frames(size: int) -> None:
    async def scenario() -> None:
        protocol = FrameProtocol(max_frame_bytes=100)
        protocol.connection_made(RecordingTransport())
        feed(protocol, frames_of([b"first"]) + struct.pack(">i", size), [])
        assert await protocol.next_frame() == bytearray(b"first")
        with pytest.raises(ProtocolError, match="not positive"):
            await protocol.next_frame()

    asyncio.run(scenario())


def test_end_of_input_comes_after_the_queued_frames() -> None:
    async def scenario() -> None:
        protocol = FrameProtocol(max_frame_bytes=100)
        protocol.connection_made(RecordingTransport())
        feed(protocol, frames_of([b"a", b"b"]), [])
        assert protocol.eof_received() is True
        assert [bytes(f) for f in await drain(protocol, 2)] == [b"a", b"b"]  # type: ignore[arg-type]
        with pytest.raises(ConnectionLostError):
            await protocol.next_frame()

    asyncio.run(scenario())


def test_reading_pauses_while_frames_pile_up() -> None:
    async def scenario() -> None:
        protocol = FrameProtocol(max_frame_bytes=100)
        transport = RecordingTransport()
        protocol.connection_made(transport)
        feed(protocol, frames_of([b"x"] * 40), [])
        assert transport.paused
        await drain(protocol, 40)
        assert not transport.paused

    asyncio.run(scenario())


def connected(
    budget: RequestBudget, max_frame_bytes: int = 10 * SCRATCH_BYTES
) -> tuple[FrameProtocol, RecordingTransport]:
    protocol = FrameProtocol(max_frame_bytes, budget=budget)
    transport = RecordingTransport()
    protocol.connection_made(transport)
    return protocol, transport


def feed_while_reading(protocol: FrameProtocol, transport: RecordingTransport, data: bytes) -> int:
    """Deliver as much of `data` as the protocol reads before it pauses; how much that was."""
    position = 0
    while position < len(data) and not transport.paused:
        buffer = protocol.get_buffer(-1)
        n = min(len(buffer), len(data) - position)
        buffer[:n] = data[position : position + n]
        protocol.buffer_updated(n)
        position += n
    return position


def test_a_large_frame_is_charged_as_its_bytes_arrive_not_as_declared() -> None:
    async def scenario() -> None:
        budget = RequestBudget(100 * SCRATCH_BYTES)
        tricklers = [connected(budget, 50 * SCRATCH_BYTES) for _ in range(6)]
        for protocol, _ in tricklers:
            feed(protocol, struct.pack(">i", 50 * SCRATCH_BYTES) + b"t", [])
        # Six frames declaring half the budget each hold one step of it between them.
        assert budget.used == 6 * CHARGE_STEP_BYTES
        protocol, transport = connected(budget)
        size = 3 * SCRATCH_BYTES
        assert feed_while_reading(protocol, transport, frames_of([b"a" * size])) == size + 4
        assert bytes(await protocol.next_frame()) == b"a" * size
        assert budget.used == 6 * CHARGE_STEP_BYTES + size

    asyncio.run(scenario())


def test_partial_frames_never_take_the_budget_so_that_none_can_finish() -> None:
    async def scenario() -> None:
        budget = RequestBudget(4 * SCRATCH_BYTES)
        size = 3 * SCRATCH_BYTES
        (first, first_transport), (second, second_transport) = connected(budget), connected(budget)
        data = [frames_of([b"1" * size]), frames_of([b"2" * size])]
        sent = [0, 0]
        # Charged half each, both would wait for ever; the budget lets one finish.
        for _ in range(8):
            for i, (protocol, transport) in enumerate(
                [(first, first_transport), (second, second_transport)]
            ):
                if not transport.paused and sent[i] < len(data[i]):
                    chunk = data[i][sent[i] : sent[i] + SCRATCH_BYTES]
                    sent[i] += feed_while_reading(protocol, transport, chunk)
        assert sent[0] == len(data[0]) and second_transport.paused
        first.release(await first.next_frame())
        assert not second_transport.paused
        feed(second, data[1][sent[1] :], [])
        assert bytes(await second.next_frame()) == b"2" * size

    asyncio.run(scenario())


def test_one_connection_holds_at_most_its_share_of_the_budget() -> None:
    async def scenario() -> None:
        budget = RequestBudget(1000)
        protocol, transport = connected(budget)
        protocol.set_limits(100, 20)
        assert feed_while_reading(protocol, transport, frames_of([b"12345678"] * 3)) == 36
        assert transport.paused and budget.used == 16
        frame = await protocol.next_frame()
        assert transport.paused  # taken by the reader, still held until released
        protocol.release(frame)
        assert not transport.paused and budget.used == 16

    asyncio.run(scenario())


def test_small_frames_wait_for_the_budget_too() -> None:
    async def scenario() -> None:
        budget = RequestBudget(10)
        protocol, transport = connected(budget)
        feed(protocol, frames_of([b"12345678", b"abcdefgh"]), [])
        frame = await protocol.next_frame()
        assert transport.paused and budget.used == 8
        protocol.release(frame)
        assert bytes(await protocol.next_frame()) == b"abcdefgh"
        assert not transport.paused and budget.used == 8

    asyncio.run(scenario())


def test_closing_gives_back_what_nobody_will_read() -> None:
    async def scenario() -> None:
        budget = RequestBudget(10 * SCRATCH_BYTES)
        protocol, _ = connected(budget)
        feed(protocol, frames_of([b"x" * 10]) + struct.pack(">i", 2 * SCRATCH_BYTES) + b"y", [])
        assert budget.used == 10 + CHARGE_STEP_BYTES
        protocol.discard()
        assert budget.used == 0

    asyncio.run(scenario())


def test_the_read_clock_runs_only_while_a_frame_is_partly_here() -> None:
    async def scenario() -> None:
        protocol, _ = connected(RequestBudget(SCRATCH_BYTES))
        assert protocol.receiving_since is None
        feed(protocol, struct.pack(">i", 5) + b"ab", [])
        started = protocol.receiving_since
        assert started is not None
        feed(protocol, b"c", [])
        assert protocol.receiving_since == started
        # The frame completes and the next one begins in the same read: a new clock.
        protocol.receiving_since = started - 100
        feed(protocol, b"de" + struct.pack(">i", 5), [])
        assert protocol.receiving_since is not None and protocol.receiving_since >= started
        assert bytes(await protocol.next_frame()) == b"abcde"
        feed(protocol, b"fghij", [])
        assert protocol.receiving_since is None

    asyncio.run(scenario())
