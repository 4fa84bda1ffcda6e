"""The broker's network edge: asyncio connections that turn frames into handler calls.

Each connection is served by one task that reads a frame, handles it and writes the
answer before reading the next, so answers leave in request order and a producer's
batches are appended in the order it sent them. Clients pipeline by sending ahead;
long-polling fetches should use their own connection.

Bad input never takes the broker down: a frame whose header cannot be read closes the
connection; a frame over the size limit gets a MESSAGE_TOO_LARGE answer, then the
connection closes (its body is never read); anything else gets a typed error answer.
"""

from __future__ import annotations

import asyncio
import logging

from brokerd.api import HANDLERS, BrokerContext
from spark_replica.errors import (
    BrokerResponseError,
    ConnectionLostError,
    InvalidRequestError,
    MessageTooLargeError,
    ProtocolError,
    UnknownServerError,
    UnsupportedVersionError,
    wire_message,
)
from spark_replica.protocol import REQUEST_TYPES, is_supported
from spark_replica.protocol.apis import ApiKey
from spark_replica.protocol.frames import (
    Buffer,
    RequestHeader,
    ResponseHeader,
    encode_response,
)
from spark_replica.protocol.primitives import Reader, Writer
from spark_replica.transport import Frame, FrameStream, OversizedFrame, serve_frame_streams

logger = logging.getLogger("brokerd.server")

# api key, api version and correlation id: enough to answer a frame we will not read.
_FIXED_HEADER_BYTES = 8


class RequestServer:
    def __init__(self, ctx: BrokerContext, host: str, port: int, max_frame_bytes: int) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen; return the bound port (useful when asked for port 0)."""
        self._server = await serve_frame_streams(
            self.host, self.port, self.max_frame_bytes, _FIXED_HEADER_BYTES, self._on_stream
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=5)
        if self._server is not None:
            await self._server.wait_closed()

    def _on_stream(self, stream: FrameStream) -> None:
        task = asyncio.create_task(self._serve(stream))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, stream: FrameStream) -> None:
        try:
            while True:
                frame = await stream.read_frame()
                if isinstance(frame, OversizedFrame):
                    await self._refuse_oversized(stream, frame)
                    return
                answer = await self._handle(frame)
                if answer is not None:
                    await stream.write(answer)
        except ConnectionLostError:
            pass
        except ProtocolError as exc:
            logger.warning("closing connection from %s: %s", stream.peer, exc)
        finally:
            stream.close()

    async def _refuse_oversized(self, stream: FrameStream, frame: OversizedFrame) -> None:
        header = Reader(frame.head)
        header.int16()
        header.int16()
        error = MessageTooLargeError(
            f"request of {frame.size} bytes is over the limit of {self.max_frame_bytes}"
        )
        await stream.write(_error_response(header.int32(), error))
        logger.warning("closing connection from %s: %s", stream.peer, error)

    async def _handle(self, frame: Frame) -> list[Buffer] | None:
        reader = Reader(frame)
        header = RequestHeader.read(reader)
        if not is_supported(header.api_key, header.api_version):
            error = UnsupportedVersionError(
                f"api key {header.api_key} version {header.api_version} is not supported"
            )
            return _error_response(header.correlation_id, error)
        api_key = ApiKey(header.api_key)
        try:
            request = REQUEST_TYPES[api_key].read(reader)
            reader.expect_end()
        except ProtocolError as exc:
            error = InvalidRequestError(f"malformed {api_key.name} request: {exc}")
            return _error_response(header.correlation_id, error)
        try:
            response = await HANDLERS[api_key](self.ctx, request)
        except BrokerResponseError as exc:
            return _error_response(header.correlation_id, exc)
        except Exception as exc:
            logger.exception("%s request failed", api_key.name)
            return _error_response(header.correlation_id, UnknownServerError(repr(exc)))
        if response is None:
            return None
        body = Writer()
        try:
            response.write(body)
        except ProtocolError as exc:
            logger.exception("cannot encode the %s response", api_key.name)
            return _error_response(header.correlation_id, UnknownServerError(str(exc)))
        return encode_response(ResponseHeader(header.correlation_id, 0, None), body)


def _error_response(correlation_id: int, error: BrokerResponseError) -> list[Buffer]:
    return encode_response(ResponseHeader(correlation_id, error.code, wire_message(error)), None)
