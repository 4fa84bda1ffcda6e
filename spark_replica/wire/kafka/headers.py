"""Kafka's request and response headers, and whole frames built from the tables.

A request header is v1 (api key, version, correlation id, nullable int16 client id)
and, when the API at that version is flexible, v2: the same plus a tagged-field
section. A response header is v0 (the correlation id) or, when flexible, v1 with a
tagged-field section; ApiVersions always answers with v0, because a client reads
that header before it knows which versions the broker speaks (KIP-511).
"""

from __future__ import annotations

import struct
from typing import Any

from spark_replica.errors import ProtocolError
from spark_replica.wire.kafka.versions import REQUESTS, RESPONSES, is_flexible
from spark_replica.wire.primitives import Buffer, Chunk, Reader, Writer
from spark_replica.wire.request_header import RequestHeader
from spark_replica.wire.schema import Data

API_VERSIONS = 18
SIZE = struct.Struct(">i")


def read_request_header(reader: Reader) -> RequestHeader:
    """The header at the start of a request frame (without its size prefix)."""
    header = RequestHeader.read(reader)
    if is_flexible(header.api_key, header.api_version):
        reader.skip_tagged_fields()
    return header


def write_request_header(writer: Writer, header: RequestHeader) -> None:
    header.write(writer)
    if is_flexible(header.api_key, header.api_version):
        writer.empty_tagged_fields()


def response_header_is_flexible(api_key: int, version: int) -> bool:
    return api_key != API_VERSIONS and is_flexible(api_key, version)


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any
) -> list[Chunk]:
    """A whole request frame as buffers to write in order, size prefix first."""
    writer = Writer()
    write_request_header(writer, RequestHeader(api_key, version, correlation_id, client_id))
    REQUESTS[api_key].encode(version, body, writer)
    return [SIZE.pack(len(writer)), *writer.buffers()]


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> list[Chunk]:
    """A whole response frame as buffers to write in order, size prefix first."""
    writer = Writer()
    writer.int32(correlation_id)
    if response_header_is_flexible(api_key, version):
        writer.empty_tagged_fields()
    RESPONSES[api_key].encode(version, body, writer)
    return [SIZE.pack(len(writer)), *writer.buffers()]


def decode_request(frame: Buffer) -> tuple[RequestHeader, Data]:
    """A request frame (without its size prefix): header and body."""
    reader = Reader(frame)
    header = read_request_header(reader)
    message = REQUESTS.get(header.api_key)
    if message is None:
        raise ProtocolError(f"no table for api key {header.api_key}")
    return header, message.decode(header.api_version, reader)


def decode_response(api_key: int, version: int, frame: Buffer) -> tuple[int, Data]:
    """A response frame (without its size prefix): its correlation id and body."""
    reader = Reader(frame)
    correlation_id = reader.int32()
    if response_header_is_flexible(api_key, version):
        reader.skip_tagged_fields()
    return correlation_id, RESPONSES[api_key].decode(version, reader)
