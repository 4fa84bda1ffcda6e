"""Length-prefixed frames over asyncio, with as few copies of large payloads as possible.

Both ends of a connection (the broker's server and the client) read and write frames
through a FrameStream. Reading uses a BufferedProtocol: small frames are parsed out of
one scratch buffer, and a frame too large for it gets a buffer of its own into which
the socket reads directly, so a 10 MB produce request is received with one copy, and
the broker can stamp offsets into it in place. That buffer comes from Arrow's memory
pool, which keeps freed blocks for the next frame: a fresh bytearray per frame is
fresh memory from the kernel each time, and its page faults cost more than the copy.
The scratch buffer is an anonymous memory map, so that its pages cost memory only once
bytes have landed in them: a thousand connections that send nothing cost next to nothing.
Writing hands the transport a list of buffers (header fields and the record bytes
separately), so record bytes are never concatenated into a message buffer first. Record
bytes may also be ranges of a log file (file_region.py): on a plaintext connection on
asyncio's loop they go by sendfile(2), from the page cache to the socket; elsewhere they
are read as they are written.

Flow control both ways: reading pauses while too many frames wait to be handled, and
`drain()` waits while the transport's write buffer is above its high-water mark. A
server also shares one RequestBudget among its connections, charged only for bytes that
have arrived: a frame read whole from the scratch buffer when it is complete, a large
frame in steps of CHARGE_STEP_BYTES ahead of its bytes, so that a client declaring a
huge frame and trickling it holds next to nothing. A connection that finds the budget
spent stops reading until bytes are given back, and one connection holds at most
`max_held_bytes` of it (its frames queued, being handled and arriving), so that no one
client holds the budget. A large frame's buffer is allocated at its declared size but
costs memory only as its pages are written. Charging partial frames could deadlock (every
frame half-charged, none able to finish): the budget only lets a frame grow while some
arriving frame could still be completed with what the others leave (RequestBudget).

For the server's deadlines, a protocol notes when it last received bytes and since when
it has been reading a frame that has not arrived whole (time spent not reading, for flow
control, is not counted against the sender).
"""

from __future__ import annotations

import asyncio
import collections
import mmap
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, cast

import pyarrow as pa

from spark_replica.errors import ConnectionLostError, ProtocolError, SslHandshakeError
from spark_replica.file_region import ShortRegionError
from spark_replica.request_budget import RequestBudget
from spark_replica.tls_sniffing import SniffingServer, serve_sniffing_tls
from spark_replica.wire.native.frames import SIZE, SIZE_BYTES
from spark_replica.wire.primitives import BUFFER_TYPES, Chunk, StoredBytes

SCRATCH_BYTES = 256 * 1024
# Buffers at least this large are written on their own rather than joined with others.
LARGE_WRITE_BYTES = 64 * 1024
# Stop reading from the socket while this many frames wait to be handled.
MAX_QUEUED_FRAMES = 32
# A large frame is charged to the budget this much ahead of its bytes, not all at once.
CHARGE_STEP_BYTES = SCRATCH_BYTES

Buffer = bytes | bytearray | memoryview
Frame = bytearray | memoryview  # a frame's body; writable either way


@dataclass(frozen=True)
class OversizedFrame:
    """A frame over the limit: its declared size and the first bytes of its body."""

    size: int
    head: bytes


class FrameProtocol(asyncio.BufferedProtocol):
    """Turns the byte stream into frames queued for one reader."""

    def __init__(
        self,
        max_frame_bytes: int,
        head_bytes_of_oversized: int = 0,
        on_stream: Callable[[FrameStream], None] | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        # The most of the budget this connection may hold at once (set_limits).
        self.max_held_bytes = max_frame_bytes
        self.head_bytes_of_oversized = head_bytes_of_oversized
        self.on_stream = on_stream
        self.budget = budget
        self.transport: asyncio.Transport | None = None
        self._scratch = mmap.mmap(-1, SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._scratch_used = 0
        self._frame: memoryview | None = None
        self._frame_filled = 0
        self._frame_charged = 0  # budget bytes taken for the frame being filled
        self._frames: collections.deque[Frame | OversizedFrame] = collections.deque()
        self._held = 0  # budget bytes of the queued frames and the one being filled
        self._in_hand = 0  # budget bytes of frames the reader took and has not released
        self._discarded = False
        self._closed: BaseException | None = None  # no more frames will arrive
        self._lost: BaseException | None = None  # the connection itself is gone
        self._frame_ready = asyncio.Event()
        self._queue_full = False
        self._waiting_for_budget = False  # for the shared budget to have room
        self._waiting_for_own = False  # for the reader to release this connection's frames
        self._reading_paused = False
        self.last_received = time.monotonic()
        # When the frame that is partly here began to arrive; None when none is.
        self.receiving_since: float | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        # A client that spoke plaintext to a TLS listener (see serve_frame_streams).
        self.plaintext_on_tls = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports implement asyncio.Transport's
        # methods without deriving from it.
        self.transport = cast(asyncio.Transport, transport)
        if self.on_stream is not None:
            self.on_stream(FrameStream(self.transport, self))

    def set_limits(self, max_frame_bytes: int, max_held_bytes: int) -> None:
        """Change the largest frame taken and the most of the budget held (the server
        raises both once a connection has logged in)."""
        self.max_frame_bytes = max_frame_bytes
        self.max_held_bytes = max_held_bytes
        if self._waiting_for_own:
            self._retry_with_budget()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return self._frame[self._frame_filled : self._frame_charged]
        return self._scratch_view[self._scratch_used :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_received = time.monotonic()
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                if self.budget is not None:
                    self.budget.complete_part(self, self._frame_charged)
                self._deliver(self._frame)
                self._frame = None
            elif self._frame_filled == self._frame_charged:
                self._charge_more()
        else:
            self._scratch_used += nbytes
            self._parse_scratch()
        self._update_reading()

    def _parse_scratch(self) -> None:
        try:
            self._parse_scratch_frames()
        except ProtocolError as exc:
            self._end_of_frames(exc)

    def _parse_scratch_frames(self) -> None:
        view = self._scratch_view
        position = 0
        while self._scratch_used - position >= SIZE_BYTES:
            (size,) = SIZE.unpack_from(view, position)
            if size <= 0:
                raise ProtocolError(f"frame size {size} is not positive")
            available = self._scratch_used - position - SIZE_BYTES
            start = position + SIZE_BYTES
            if size > self.max_frame_bytes:
                if available < min(size, self.head_bytes_of_oversized):
                    break
                head = bytes(view[start : start + self.head_bytes_of_oversized])
                self._deliver(OversizedFrame(size, head))
                self._end_of_frames(ProtocolError(f"frame of {size} bytes is over the limit"))
                self._scratch_used = 0
                return
            if available >= size:
                if not self._take(size):
                    break
                self._deliver(bytearray(view[start : start + size]))
                position = start + size
                continue
            if size + SIZE_BYTES > SCRATCH_BYTES:
                first = size if self.budget is None else min(size, CHARGE_STEP_BYTES)
                if not self._take_part(first, size - first):
                    break
                frame = memoryview(pa.allocate_buffer(size)).cast("B")
                frame[:available] = view[start : self._scratch_used]
                self._frame, self._frame_filled, self._frame_charged = frame, available, first
                position = self._scratch_used
            break
        remaining = self._scratch_used - position
        if position and remaining:
            self._scratch.move(0, position, remaining)
        self._scratch_used = remaining

    def _take(self, size: int) -> bool:
        """Take a whole frame's `size` bytes from the budget, or wait (not reading) until
        they can be."""
        if self.budget is None:
            return True
        if self._discarded or not self._within_own_share(size):
            return False
        if self.budget.try_take(size):
            self._held += size
            return True
        self._wait_for_budget()
        return False

    def _take_part(self, size: int, still_needed_after: int) -> bool:
        """Charge `size` more bytes of the frame being filled, or wait (not reading)."""
        if self.budget is None:
            return True
        if self._discarded or not self._within_own_share(size):
            return False
        if self.budget.try_take_part(self, size, still_needed_after):
            self._held += size
            return True
        self._wait_for_budget()
        return False

    def _within_own_share(self, size: int) -> bool:
        """Whether this connection may hold `size` more bytes; if not, it waits for its
        reader to release some."""
        if self._held + self._in_hand + size <= self.max_held_bytes:
            return True
        self._waiting_for_own = True
        return False

    def _wait_for_budget(self) -> None:
        assert self.budget is not None
        self._waiting_for_budget = True
        self.budget.wait(self._retry_with_budget)

    def _charge_more(self) -> None:
        """The frame being filled has used what it was charged: charge the next step."""
        assert self._frame is not None
        lacking = len(self._frame) - self._frame_charged
        step = min(CHARGE_STEP_BYTES, lacking)
        if self._take_part(step, lacking - step):
            self._frame_charged += step

    def _retry_with_budget(self) -> None:
        self._waiting_for_budget = False
        self._waiting_for_own = False
        if self._closed is None:
            if self._frame is not None:
                if self._frame_filled == self._frame_charged:
                    self._charge_more()
            else:
                self._parse_scratch()
        self._update_reading()

    def _deliver(self, frame: Frame | OversizedFrame) -> None:
        self.receiving_since = None  # whatever follows is a new frame, on a new clock
        self._frames.append(frame)
        self._frame_ready.set()
        if len(self._frames) >= MAX_QUEUED_FRAMES:
            self._queue_full = True

    def _update_reading(self) -> None:
        """Read from the socket exactly while a frame may be taken in."""
        if self.transport is None or self._lost is not None:
            return
        pause = (
            self._closed is not None
            or self._queue_full
            or self._waiting_for_budget
            or self._waiting_for_own
        )
        if pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
        partial = self._frame is not None or self._scratch_used > 0
        if not partial or self._reading_paused:
            self.receiving_since = None
        elif self.receiving_since is None:
            self.receiving_since = time.monotonic()

    async def next_frame(self) -> Frame | OversizedFrame:
        """The next frame; raises ConnectionLostError once the stream has ended.

        With a budget, the reader owns the frame's bytes from here: it gives them back
        with `release` once the frame is handled.
        """
        while not self._frames:
            if self._closed is not None:
                raise self._closed
            self._frame_ready.clear()
            await self._frame_ready.wait()
        frame = self._frames.popleft()
        if self.budget is not None and not isinstance(frame, OversizedFrame):
            self._held -= len(frame)
            self._in_hand += len(frame)
        if self._queue_full and len(self._frames) < MAX_QUEUED_FRAMES // 2:
            self._queue_full = False
            self._update_reading()
        return frame

    def release(self, frame: Frame | OversizedFrame) -> None:
        """Give a handled frame's bytes back to the budget."""
        if self.budget is not None and not isinstance(frame, OversizedFrame):
            self._in_hand -= len(frame)
            self.budget.release(len(frame))
            if self._waiting_for_own:
                self._retry_with_budget()

    def discard(self) -> None:
        """Give back the budget of frames nobody will read, once the stream is closed.

        Frames the reader holds are still given back by its `release`."""
        if self.budget is None or self._discarded:
            return
        self._discarded = True
        self.budget.stop_waiting(self._retry_with_budget)
        self._waiting_for_budget = self._waiting_for_own = False
        self._frames.clear()
        queued = self._held
        if self._frame is not None:
            queued -= self._frame_charged
            self.budget.drop_part(self, self._frame_charged)
            self._frame = None
        self._held = 0
        if queued:
            self.budget.release(queued)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = "closed" if exc is None else f"failed: {exc!r}"
        self._lost = ConnectionLostError(f"connection {reason}")
        if self._closed is None:
            self._closed = self._lost
        self._frame_ready.set()
        self._writable.set()

    def _end_of_frames(self, error: BaseException) -> None:
        """No frame follows those queued: the reader handles them, then gets `error`.

        The transport stays open so that answers to the frames already read still go
        out; the reader closes it when it reaches the end.
        """
        if self._closed is None:
            self._closed = error
        self._frame_ready.set()
        self._update_reading()

    def eof_received(self) -> bool:
        self._end_of_frames(ConnectionLostError("the peer closed its side of the connection"))
        # Keep our side open to answer what was read; TLS cannot be half-closed.
        return self.transport is None or self.transport.get_extra_info("sslcontext") is None

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def drain(self) -> None:
        await self._writable.wait()
        if self._lost is not None:
            raise self._lost


class FrameStream:
    """One connection's frames: read them in order, write lists of buffers."""

    def __init__(self, transport: asyncio.Transport, protocol: FrameProtocol) -> None:
        self.transport = transport
        self.protocol = protocol

    @property
    def peer(self) -> object:
        return self.transport.get_extra_info("peername")

    async def read_frame(self) -> Frame | OversizedFrame:
        return await self.protocol.next_frame()

    async def write(self, buffers: Sequence[Chunk]) -> None:
        """Write buffers in order: small ones joined, large ones handed over as they are.

        A transport tries to send a buffer at once and keeps only what the socket did
        not take, so handing over a large buffer directly avoids first joining it with
        the small header fields into one fresh copy. A file range is sent once what
        comes before it is, and closed once sent.
        """
        if self.transport.is_closing():
            raise ConnectionLostError("connection is closed")
        small: list[Buffer] = []
        for buffer in buffers:
            if isinstance(buffer, BUFFER_TYPES) and len(buffer) < LARGE_WRITE_BYTES:
                small.append(buffer)
                continue
            if small:
                self.transport.write(b"".join(small))
                small = []
            if isinstance(buffer, BUFFER_TYPES):
                self.transport.write(buffer)
            else:
                await self._write_region(buffer)
        if small:
            self.transport.write(b"".join(small))
        await self.protocol.drain()

    async def _write_region(self, region: StoredBytes) -> None:
        """Send a file range: by sendfile where the loop and transport can, else read it.

        A range that comes up short (the file was truncated since it was taken) leaves
        a frame shorter than its size prefix said: the connection cannot go on.
        """
        try:
            if self._can_sendfile():
                try:
                    # sendfile needs only the file's fileno(); a region has its own.
                    file = cast(IO[bytes], region)
                    sent = await asyncio.get_running_loop().sendfile(
                        self.transport, file, region.offset, region.count, fallback=False
                    )
                except OSError as exc:
                    raise ConnectionLostError(f"sending stored records failed: {exc}") from exc
                if sent != region.count:
                    raise ConnectionLostError(
                        f"sent {sent} of a stored range of {region.count} bytes: "
                        "the log was truncated under it"
                    )
                return
            try:
                data = region.read()
            except ShortRegionError as exc:
                raise ConnectionLostError(str(exc)) from exc
            self.transport.write(data)
        finally:
            region.close()

    def _can_sendfile(self) -> bool:
        """Only asyncio's own loops send a file natively, and only without TLS (uvloop
        has no sendfile; a TLS transport must encrypt what it sends)."""
        return (
            isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop)
            and self.transport.get_extra_info("sslcontext") is None
            and not self.transport.is_closing()
        )

    def release(self, frame: Frame | OversizedFrame) -> None:
        """Give a handled frame's bytes back to the server's budget (a no-op without one)."""
        self.protocol.release(frame)

    def close(self) -> None:
        self.transport.close()
        self.protocol.discard()

    def abort(self) -> None:
        """Close at once, dropping unsent answers: for a peer that must not hold us up."""
        self.transport.abort()
        self.protocol.discard()


async def open_frame_stream(
    host: str,
    port: int,
    max_frame_bytes: int,
    timeout_s: float,
    ssl_context: ssl.SSLContext | None = None,
) -> FrameStream:
    """Connect to host:port, over TLS with a context; raise ConnectionLostError if that
    fails or times out, SslHandshakeError if the TLS handshake fails (not retriable: an
    untrusted certificate stays untrusted)."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await asyncio.wait_for(
            loop.create_connection(
                lambda: FrameProtocol(max_frame_bytes),
                host,
                port,
                ssl=ssl_context,
                server_hostname=host if ssl_context is not None else None,
                ssl_handshake_timeout=timeout_s if ssl_context is not None else None,
            ),
            timeout_s,
        )
    except ssl.SSLError as exc:
        raise SslHandshakeError(
            f"TLS handshake with {host}:{port} failed: {_handshake_reason(exc)}"
        ) from exc
    except ConnectionResetError as exc:
        if ssl_context is None:
            raise ConnectionLostError(f"cannot connect to {host}:{port}: {exc!r}") from exc
        raise SslHandshakeError(
            f"TLS handshake with {host}:{port} failed: the broker closed the connection "
            "(does its listener use TLS?)"
        ) from exc
    except (OSError, TimeoutError) as exc:
        raise ConnectionLostError(f"cannot connect to {host}:{port}: {exc!r}") from exc
    return FrameStream(cast(asyncio.Transport, transport), protocol)


def _handshake_reason(error: ssl.SSLError) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        return (
            f"certificate verify failed: {error.verify_message} (is ssl.truststore.location "
            "the CA that signed the broker's certificate, and the host name in it?)"
        )
    reason = str(error.reason or error)
    if "WRONG_VERSION_NUMBER" in reason:
        return f"{reason} (the listener does not speak TLS: use PLAINTEXT or SASL_PLAINTEXT)"
    return reason


async def serve_frame_streams(
    host: str,
    port: int,
    max_frame_bytes: int,
    head_bytes_of_oversized: int,
    on_stream: Callable[[FrameStream], None],
    budget: RequestBudget | None = None,
    ssl_context: ssl.SSLContext | None = None,
    handshake_timeout_s: float = 30.0,
) -> asyncio.Server | SniffingServer:
    """Listen on host:port; call `on_stream` (on the loop) for every new connection.

    With a TLS context, each connection's first byte decides: a TLS handshake record
    starts TLS; anything else is a client speaking plaintext to a TLS listener, whose
    stream is handed over marked `plaintext_on_tls`, so that the server can answer its
    first request with an error that says so instead of a silent close the client would
    retry for a minute (spark_replica/tls_sniffing.py).
    """
    loop = asyncio.get_running_loop()
    if ssl_context is None:
        return await loop.create_server(
            lambda: FrameProtocol(max_frame_bytes, head_bytes_of_oversized, on_stream, budget),
            host,
            port,
        )

    def new_frame_protocol(plaintext_on_tls: bool) -> FrameProtocol:
        protocol = FrameProtocol(max_frame_bytes, head_bytes_of_oversized, on_stream, budget)
        protocol.plaintext_on_tls = plaintext_on_tls
        return protocol

    return await serve_sniffing_tls(
        host, port, new_frame_protocol, ssl_context, handshake_timeout_s
    )
