"""Framing: every message is an int32 size followed by that many bytes.

A request frame starts with a header (api key, api version, correlation id, client id);
a response frame starts with the correlation id and a top-level error code, followed by
the API's body only when that code is 0. The top-level code lets a broker answer any
request it can frame but not serve (unknown API, unsupported version, a body it cannot
decode, a frame over the size limit) with a typed error that every client can read,
without knowing the API's response layout.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from spark_replica.wire.primitives import Chunk, Reader, Writer
from spark_replica.wire.request_header import RequestHeader

SIZE = struct.Struct(">i")
SIZE_BYTES = SIZE.size
# Like Kafka's socket.request.max.bytes: a frame above this is refused unread.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
# Byte fields at least this long travel in a native frame by reference rather than
# copied: record batches, which replog's clients send in batches of tens of kilobytes.
NATIVE_LARGE_FIELD_BYTES = 64 * 1024
# Enough to read a request header (and so the correlation id) of an oversized frame.
MAX_HEADER_PEEK_BYTES = 4 + 2 + 32767 + 4 + 2


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    """Written by hand, not from a table: its error message is on the wire only when the
    error code is not 0, and the tables have no field that depends on another's value."""

    correlation_id: int
    error_code: int
    error_message: str | None

    def write(self, writer: Writer) -> None:
        writer.int32(self.correlation_id)
        writer.int16(self.error_code)
        if self.error_code:
            writer.string(self.error_message)

    @classmethod
    def read(cls, reader: Reader) -> ResponseHeader:
        correlation_id = reader.int32()
        error_code = reader.int16()
        message = reader.string() if error_code else None
        return cls(correlation_id, error_code, message)


def encode_request(header: RequestHeader, body: Writer) -> list[Chunk]:
    """The whole request frame as buffers to write in order (size prefix first)."""
    writer = Writer(NATIVE_LARGE_FIELD_BYTES)
    header.write(writer)
    writer.extend(body)
    return [SIZE.pack(len(writer)), *writer.buffers()]


def encode_response(header: ResponseHeader, body: Writer | None) -> list[Chunk]:
    """The whole response frame as buffers; the body is left out when there is an error."""
    writer = Writer(NATIVE_LARGE_FIELD_BYTES)
    header.write(writer)
    if body is not None and not header.error_code:
        writer.extend(body)
    return [SIZE.pack(len(writer)), *writer.buffers()]
