"""Byte-level codecs for the wire protocol: a Writer that appends, a Reader that slices.

Integers are big-endian. A string is an int16 length then UTF-8 bytes (-1 = null); a
bytes field is an int32 length then the bytes (-1 = null); an array is an int32 count
then its items. Strings decode with ``surrogateescape`` so that a name that is not
valid UTF-8 survives decoding and is refused by validation with a typed error, rather
than killing the whole request.

The Reader hands out ``bytes`` fields as memoryview slices of the frame: record
batches travel from socket to disk and back without being copied here. Every length and
count is checked against the bytes left in the frame before anything is sized from it
(spark_replica.wire.bounds, shared with the Kafka codec).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from spark_replica.errors import ProtocolError
from spark_replica.wire.bounds import bounded_count

T = TypeVar("T")

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

# Byte fields at least this long are passed on by reference rather than copied.
LARGE_FIELD_BYTES = 64 * 1024
# An int16 length prefix bounds every string.
MAX_STRING_BYTES = 32767


class Writer:
    """Appends encoded fields; large byte fields are kept by reference, not copied.

    The encoded message is ``buffers()``: the small fields accumulate in a bytearray,
    and a bytes field of LARGE_FIELD_BYTES or more (record batches) becomes a buffer of
    its own, so that it reaches the socket without being copied into the message.
    """

    __slots__ = ("_chunks", "_size_of_chunks", "buf")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._chunks: list[bytes | bytearray | memoryview] = []
        self._size_of_chunks = 0

    def __len__(self) -> int:
        return self._size_of_chunks + len(self.buf)

    def buffers(self) -> list[bytes | bytearray | memoryview]:
        return [*self._chunks, self.buf]

    def extend(self, other: Writer) -> None:
        """Append everything `other` has encoded, its large buffers by reference."""
        for chunk in other.buffers():
            self._append_large(chunk) if len(chunk) >= LARGE_FIELD_BYTES else self._copy(chunk)

    def _copy(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def _append_large(self, data: bytes | bytearray | memoryview) -> None:
        self._chunks.append(self.buf)
        self._chunks.append(data)
        self._size_of_chunks += len(self.buf) + len(data)
        self.buf = bytearray()

    def int8(self, value: int) -> None:
        self.buf += _INT8.pack(value)

    def int16(self, value: int) -> None:
        self.buf += _INT16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += _INT32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += _INT64.pack(value)

    def boolean(self, value: bool) -> None:
        self.buf += b"\x01" if value else b"\x00"

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode("utf-8", "surrogateescape")
        if len(data) > MAX_STRING_BYTES:
            raise ProtocolError(f"string of {len(data)} bytes is over the {MAX_STRING_BYTES} limit")
        self.int16(len(data))
        self.buf += data

    def bytes_(self, value: bytes | bytearray | memoryview | None) -> None:
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        if len(value) >= LARGE_FIELD_BYTES:
            self._append_large(value)
        else:
            self.buf += value

    def array(self, items: Iterable[T] | None, write_item: Callable[[T], None]) -> None:
        if items is None:
            self.int32(-1)
            return
        items = list(items)
        self.int32(len(items))
        for item in items:
            write_item(item)

    def int32_array(self, items: Iterable[int]) -> None:
        self.array(items, self.int32)

    def topics(self, topics: Iterable[Any], write_partition: Callable[[Any], None]) -> None:
        """The common "per topic: name, then per partition: ..." layout."""

        def write_topic(topic: Any) -> None:
            self.string(topic.topic)
            self.array(topic.partitions, write_partition)

        self.array(topics, write_topic)

    def getvalue(self) -> bytes:
        return b"".join(self.buffers())


class Reader:
    """Reads fields in order from one frame; raises ProtocolError on truncation."""

    __slots__ = ("pos", "view")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.view = memoryview(data)
        self.pos = pos

    def _unpack(self, codec: struct.Struct) -> int:
        end = self.pos + codec.size
        if end > len(self.view):
            raise ProtocolError(f"frame ends at byte {len(self.view)}, needed {end}")
        (value,) = codec.unpack_from(self.view, self.pos)
        self.pos = end
        return value

    def int8(self) -> int:
        return self._unpack(_INT8)

    def int16(self) -> int:
        return self._unpack(_INT16)

    def int32(self) -> int:
        return self._unpack(_INT32)

    def int64(self) -> int:
        return self._unpack(_INT64)

    def boolean(self) -> bool:
        return self._unpack(_INT8) != 0

    def _take(self, length: int) -> memoryview:
        end = self.pos + bounded_count(length, len(self.view) - self.pos, "byte")
        chunk = self.view[self.pos : end]
        self.pos = end
        return chunk

    def string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        return bytes(self._take(length)).decode("utf-8", "surrogateescape")

    def required_string(self) -> str:
        value = self.string()
        if value is None:
            raise ProtocolError("a required string is null")
        return value

    def bytes_(self) -> memoryview | None:
        length = self.int32()
        if length == -1:
            return None
        return self._take(length)

    def array(self, read_item: Callable[[], T]) -> list[T] | None:
        count = self.int32()
        if count == -1:
            return None
        return [read_item() for _ in range(bounded_count(count, self.remaining(), "array"))]

    def required_array(self, read_item: Callable[[], T]) -> list[T]:
        items = self.array(read_item)
        if items is None:
            raise ProtocolError("a required array is null")
        return items

    def int32_array(self) -> list[int]:
        return self.required_array(self.int32)

    def topics(
        self, make_topic: Callable[[str, list[Any]], T], read_partition: Callable[[], Any]
    ) -> list[T]:
        """Read the layout Writer.topics writes, building each topic with `make_topic`."""
        return self.required_array(
            lambda: make_topic(self.required_string(), self.required_array(read_partition))
        )

    def remaining(self) -> int:
        return len(self.view) - self.pos

    def expect_end(self) -> None:
        if self.pos != len(self.view):
            raise ProtocolError(f"{len(self.view) - self.pos} unexpected bytes after the message")
