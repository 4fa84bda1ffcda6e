"""How many bytes a stored batch's Arrow payload holds once its buffers are decompressed,
read from what the payload declares, before anything is decompressed.

A payload with Arrow buffer compression (lz4 or zstd) stores, at the start of each
compressed buffer, the buffer's uncompressed length as a little-endian int64 (-1: the
buffer is stored as it is). Arrow's reader allocates that length and decompresses into
it, so 17 KB of zstd declaring 512 MiB costs 512 MiB and seconds of CPU. The leader
therefore adds up the declared lengths first (brokerd.batch_validation) and refuses a
payload declaring more than the topic's max.message.bytes (RECORD_TOO_LARGE), as the
Kafka listener bounds its codecs (spark_replica.wire.kafka.records.decompress).

The lengths are read from the IPC messages' metadata, a flatbuffer (Arrow's
Message.fbs: a Message table whose header union holds a RecordBatch table with its
`buffers` vector of (offset, length) structs and its optional `compression` table).
Only those few fields are read, each position checked against the metadata's size;
anything that does not parse is CORRUPT_MESSAGE. This module does no I/O.
"""

from __future__ import annotations

import struct

import pyarrow as pa

from spark_replica.errors import CorruptMessageError
from spark_replica.wire.bounds import bounded_count

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_BUFFER = struct.Struct("<qq")  # Arrow's Buffer struct: offset, length (in the body)
# Field indexes in Arrow's Message.fbs tables.
_MESSAGE_HEADER = 2  # Message: version, header_type, header, bodyLength, custom_metadata
_BATCH_BUFFERS = 2  # RecordBatch: length, nodes, buffers, compression, ...
_BATCH_COMPRESSION = 3
_UNCOMPRESSED = -1  # a compressed body's buffer stored as it is
_LENGTH_PREFIX = 8


def declared_payload_bytes(payload: pa.Buffer) -> int:
    """The bytes the payload's record batches hold decompressed, as they declare them
    (their body's size where they are not compressed). CorruptMessageError if the
    payload's messages do not parse."""
    try:
        reader = pa.ipc.MessageReader.open_stream(payload)
        total = 0
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                return total
            if message.type == "record batch":
                total += _batch_bytes(message.metadata, message.body)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptMessageError(f"batch payload is not a readable Arrow stream: {exc}") from exc


def _batch_bytes(metadata: pa.Buffer, body: pa.Buffer | None) -> int:
    meta = memoryview(metadata)
    data = memoryview(body) if body is not None else memoryview(b"")
    batch = _field(meta, _deref(meta, 0), _MESSAGE_HEADER)
    if batch is None:
        raise CorruptMessageError("a record batch message has no header")
    batch = _deref(meta, batch)
    if _field(meta, batch, _BATCH_COMPRESSION) is None:
        return len(data)
    buffers = _field(meta, batch, _BATCH_BUFFERS)
    if buffers is None:
        return 0
    vector = _deref(meta, buffers)
    count = bounded_count(
        _int(_U32, meta, vector),
        len(meta) - vector - 4,
        "buffer",
        _BUFFER.size,
        CorruptMessageError,
    )
    total = 0
    for index in range(count):
        offset, length = _BUFFER.unpack_from(meta, vector + 4 + index * _BUFFER.size)
        if length == 0:
            continue
        declared = _int(_I64, data, offset) if length >= _LENGTH_PREFIX else -2
        if declared == _UNCOMPRESSED:
            declared = length - _LENGTH_PREFIX
        if declared < 0:
            raise CorruptMessageError(f"a compressed buffer of {length} bytes has no length")
        total += declared
    return total


def _int(codec: struct.Struct, buf: memoryview, pos: int) -> int:
    if pos < 0 or pos + codec.size > len(buf):
        raise CorruptMessageError(f"Arrow metadata points to byte {pos}, outside its message")
    value: int = codec.unpack_from(buf, pos)[0]
    return value


def _deref(buf: memoryview, pos: int) -> int:
    """Where the flatbuffer offset stored at `pos` points."""
    return pos + _int(_U32, buf, pos)


def _field(buf: memoryview, table: int, index: int) -> int | None:
    """Where field `index` of the table at `table` lies, or None when it is absent."""
    vtable = table - _int(_I32, buf, table)
    slot = 4 + 2 * index
    if slot + 2 > _int(_U16, buf, vtable):
        return None
    offset = _int(_U16, buf, vtable + slot)
    return table + offset if offset else None
