"""The primitive types of both protocols: a Writer that appends, a Reader that slices.

Integers are big-endian. Classic encodings (all of the native protocol, Kafka's older
versions) carry an int16 string length, an int32 bytes length and an int32 array count
(-1 = null); the compact encodings of Kafka's flexible versions carry an unsigned
varint of length + 1 (0 = null). Tagged fields are an unsigned varint count, then per
field its tag, its size and its bytes.

Every length or count is checked against the bytes left in the frame before anything
is allocated for it (spark_replica.wire.bounds), and every malformed input raises
ProtocolError: a peer's bytes must never surface as IndexError, struct.error or
UnicodeError. Strings decode with
``surrogateescape`` so that a name that is not valid UTF-8 survives decoding and is
refused by validation with a typed error, rather than killing the whole request.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, Protocol, TypeVar

from spark_replica.errors import ProtocolError
from spark_replica.wire.bounds import bounded_count

Buffer = bytes | bytearray | memoryview
BUFFER_TYPES = (bytes, bytearray, memoryview)


class StoredBytes(Protocol):
    """Bytes a message carries by reference whatever their size, read or sent only when
    the message is written: `count` bytes of a file from `offset`, sent as stored
    (spark_replica/file_region.py; the codecs leave it to the transport, being I/O)."""

    offset: int
    count: int

    def __len__(self) -> int: ...

    def fileno(self) -> int: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


# What an encoded message is made of.
Chunk = Buffer | StoredBytes
T = TypeVar("T")

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")

# Kafka refuses strings longer than Short.MAX_VALUE bytes in both encodings.
MAX_STRING_BYTES = 32767
# By default, byte fields at least this long reach the socket by reference rather than
# copied; a Writer may be given another threshold (the native frames keep 64 KiB).
LARGE_FIELD_BYTES = 8 * 1024
ZERO_UUID = uuid.UUID(int=0)
_UVARINT_MAX_BYTES = 5
_VARLONG_MAX_BYTES = 10


class Writer:
    """Appends encoded fields; large byte fields are kept by reference, not copied.

    The encoded message is ``buffers()``: small fields accumulate in a bytearray, and a
    bytes or records field of `large_field_bytes` or more becomes a buffer of its own,
    so that record batches reach the socket without being joined into the message.
    A records field may also hold StoredBytes (ranges of a file), kept by reference
    whatever their size and read or sent only when the message is written.
    """

    __slots__ = ("_chunks", "_large_field_bytes", "_size_of_chunks", "buf")

    def __init__(self, large_field_bytes: int = LARGE_FIELD_BYTES) -> None:
        self.buf = bytearray()
        self._chunks: list[Chunk] = []
        self._size_of_chunks = 0
        self._large_field_bytes = large_field_bytes

    def __len__(self) -> int:
        return self._size_of_chunks + len(self.buf)

    def buffers(self) -> list[Chunk]:
        return [*self._chunks, self.buf]

    def getvalue(self) -> bytes:
        return b"".join(
            chunk if isinstance(chunk, BUFFER_TYPES) else chunk.read() for chunk in self.buffers()
        )

    def extend(self, other: Writer) -> None:
        """Append everything `other` has encoded, its large buffers by reference."""
        for chunk in other.buffers():
            self.raw(chunk)

    def raw(self, data: Chunk) -> None:
        """Append bytes as they are, by reference when large (StoredBytes always)."""
        if not isinstance(data, BUFFER_TYPES) or len(data) >= self._large_field_bytes:
            self._chunks.append(self.buf)
            self._chunks.append(data)
            self._size_of_chunks += len(self.buf) + len(data)
            self.buf = bytearray()
        else:
            self.buf += data

    def fixed(self, codec: struct.Struct, values: Sequence[Any]) -> None:
        """A run of fixed-width fields packed at once (the table engine's steps);
        struct.error when a value does not fit, for the caller to name the fields."""
        self.buf += codec.pack(*values)

    def int8(self, value: int) -> None:
        self.buf += _pack(_INT8, value)

    def int16(self, value: int) -> None:
        self.buf += _pack(_INT16, value)

    def uint16(self, value: int) -> None:
        self.buf += _pack(_UINT16, value)

    def int32(self, value: int) -> None:
        self.buf += _pack(_INT32, value)

    def uint32(self, value: int) -> None:
        self.buf += _pack(_UINT32, value)

    def int64(self, value: int) -> None:
        self.buf += _pack(_INT64, value)

    def float64(self, value: float) -> None:
        self.buf += _pack(_FLOAT64, value)

    def boolean(self, value: bool) -> None:
        self.buf += b"\x01" if value else b"\x00"

    def uuid(self, value: uuid.UUID) -> None:
        if not isinstance(value, uuid.UUID):
            raise ProtocolError(f"a uuid field holds {type(value).__name__}, not UUID")
        self.buf += value.bytes

    def unsigned_varint(self, value: int) -> None:
        if value < 0 or value > 0xFFFFFFFF:
            raise ProtocolError(f"unsigned varint {value} is out of range")
        buf = self.buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def varint(self, value: int) -> None:
        if value < -(1 << 31) or value >= 1 << 31:
            raise ProtocolError(f"varint {value} is out of range")
        self.unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)

    def varlong(self, value: int) -> None:
        if value < -(1 << 63) or value >= 1 << 63:
            raise ProtocolError(f"varlong {value} is out of range")
        zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
        buf = self.buf
        while zigzag >= 0x80:
            buf.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        buf.append(zigzag)

    def string(self, value: str | None) -> None:
        if value is None:
            self.buf += b"\xff\xff"
            return
        data = encode_utf8(value)
        self.buf += _INT16.pack(len(data))
        self.buf += data

    def required_string(self, value: str) -> None:
        if value is None:
            raise ProtocolError("a non-nullable string field holds None")
        self.string(value)

    def compact_string(self, value: str | None) -> None:
        if value is None:
            self.buf.append(0)
            return
        data = encode_utf8(value)
        self.unsigned_varint(len(data) + 1)
        self.buf += data

    def required_compact_string(self, value: str) -> None:
        if value is None:
            raise ProtocolError("a non-nullable string field holds None")
        self.compact_string(value)

    def bytes_(self, value: Buffer | None) -> None:
        if value is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        self.buf += _INT32.pack(len(value))
        self.raw(value)

    def required_bytes(self, value: Buffer) -> None:
        if value is None:
            raise ProtocolError("a non-nullable bytes field holds None")
        self.bytes_(value)

    def compact_bytes(self, value: Buffer | None) -> None:
        if value is None:
            self.buf.append(0)
            return
        self.unsigned_varint(len(value) + 1)
        self.raw(value)

    def required_compact_bytes(self, value: Buffer) -> None:
        if value is None:
            raise ProtocolError("a non-nullable bytes field holds None")
        self.compact_bytes(value)

    def records(self, value: Buffer | Sequence[Chunk] | None) -> None:
        """Record batches: one buffer or several, each written by reference when large."""
        if value is None or isinstance(value, bytes | bytearray | memoryview):
            self.bytes_(value)
            return
        self.buf += _INT32.pack(sum(len(part) for part in value))
        for part in value:
            self.raw(part)

    def compact_records(self, value: Buffer | Sequence[Chunk] | None) -> None:
        if value is None or isinstance(value, bytes | bytearray | memoryview):
            self.compact_bytes(value)
            return
        self.unsigned_varint(sum(len(part) for part in value) + 1)
        for part in value:
            self.raw(part)

    def array_length(self, count: int | None) -> None:
        self.buf += _INT32.pack(-1 if count is None else count)

    def compact_array_length(self, count: int | None) -> None:
        self.unsigned_varint(0 if count is None else count + 1)

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)

    def array(self, items: Iterable[T] | None, write_item: Callable[[T], None]) -> None:
        """A classic array written item by item (tests and fuzzers build odd bodies)."""
        if items is None:
            self.array_length(None)
            return
        items = list(items)
        self.array_length(len(items))
        for item in items:
            write_item(item)


def _pack(codec: struct.Struct, value: int | float) -> bytes:
    try:
        return codec.pack(value)
    except struct.error as exc:
        raise ProtocolError(f"value {value!r} does not fit its field: {exc}") from None


def encode_utf8(value: str) -> bytes:
    """A string field's bytes (a name that was not UTF-8 when read goes back as it came)."""
    try:
        data = value.encode("utf-8", "surrogateescape")
    except (UnicodeError, AttributeError) as exc:
        raise ProtocolError(f"string field holds an unencodable value: {exc}") from None
    if len(data) > MAX_STRING_BYTES:
        refuse_long_string(len(data))
    return data


def refuse_long_string(length: int) -> NoReturn:
    raise ProtocolError(f"string of {length} bytes is over the {MAX_STRING_BYTES} limit")


class Reader:
    """Reads fields in order from one frame; raises ProtocolError on anything malformed.

    ``end`` bounds the reader inside a larger frame (a tagged field's bytes).
    """

    __slots__ = ("end", "pos", "view")

    def __init__(self, data: Buffer, pos: int = 0, end: int | None = None) -> None:
        self.view = data if isinstance(data, memoryview) else memoryview(data)
        if self.view.format != "B" or self.view.ndim != 1:
            self.view = self.view.cast("B")
        self.pos = pos
        self.end = len(self.view) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _unpack(self, codec: struct.Struct) -> int:
        pos = self.pos
        end = pos + codec.size
        if end > self.end:
            raise ProtocolError(f"frame ends at byte {self.end}, a field needed {end}")
        self.pos = end
        return codec.unpack_from(self.view, pos)[0]

    def int8(self) -> int:
        return self._unpack(_INT8)

    def int16(self) -> int:
        return self._unpack(_INT16)

    def uint16(self) -> int:
        return self._unpack(_UINT16)

    def int32(self) -> int:
        return self._unpack(_INT32)

    def uint32(self) -> int:
        return self._unpack(_UINT32)

    def int64(self) -> int:
        return self._unpack(_INT64)

    def float64(self) -> float:
        return self._unpack(_FLOAT64)

    def boolean(self) -> bool:
        return self._unpack(_INT8) != 0

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    def take(self, length: int) -> memoryview:
        """The next `length` bytes as a slice of the frame (no copy)."""
        pos = self.pos
        end = pos + bounded_count(length, self.end - pos, "byte")
        self.pos = end
        return self.view[pos:end]

    def unsigned_varint(self) -> int:
        view = self.view
        pos = self.pos
        if pos < self.end:
            first = view[pos]
            if first < 0x80:
                self.pos = pos + 1
                return first
        return self._long_varint(_UVARINT_MAX_BYTES)

    def _long_varint(self, max_bytes: int) -> int:
        view = self.view
        pos = self.pos
        value = 0
        shift = 0
        for _ in range(max_bytes):
            if pos >= self.end:
                raise ProtocolError("a varint runs past the frame end")
            byte = view[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return value
            shift += 7
        raise ProtocolError(f"a varint is longer than {max_bytes} bytes")

    def varint(self) -> int:
        raw = self.unsigned_varint() & 0xFFFFFFFF
        return (raw >> 1) ^ -(raw & 1)

    def varlong(self) -> int:
        raw = self._long_varint(_VARLONG_MAX_BYTES) & 0xFFFFFFFFFFFFFFFF
        return (raw >> 1) ^ -(raw & 1)

    def _text(self, length: int) -> str:
        if length > MAX_STRING_BYTES:
            refuse_long_string(length)
        return str(self.take(length), "utf-8", "surrogateescape")

    def string(self) -> str | None:
        length = self._unpack(_INT16)
        if length == -1:
            return None
        return self._text(length)

    def required_string(self) -> str:
        value = self.string()
        if value is None:
            raise ProtocolError("a non-nullable string field is null")
        return value

    def compact_string(self) -> str | None:
        length = self.unsigned_varint()
        if length == 0:
            return None
        return self._text(length - 1)

    def required_compact_string(self) -> str:
        value = self.compact_string()
        if value is None:
            raise ProtocolError("a non-nullable string field is null")
        return value

    def records(self) -> memoryview | None:
        length = self._unpack(_INT32)
        if length == -1:
            return None
        return self.take(length)

    def compact_records(self) -> memoryview | None:
        length = self.unsigned_varint()
        if length == 0:
            return None
        return self.take(length - 1)

    def bytes_(self) -> bytes | None:
        value = self.records()
        return None if value is None else bytes(value)

    def required_bytes(self) -> bytes:
        value = self.records()
        if value is None:
            raise ProtocolError("a non-nullable bytes field is null")
        return bytes(value)

    def compact_bytes(self) -> bytes | None:
        value = self.compact_records()
        return None if value is None else bytes(value)

    def required_compact_bytes(self) -> bytes:
        value = self.compact_records()
        if value is None:
            raise ProtocolError("a non-nullable bytes field is null")
        return bytes(value)

    def array_length(self, item_bytes: int = 1) -> int:
        """An array's count (-1 = null), refused when the frame cannot hold that many
        items of at least `item_bytes` each."""
        count = self._unpack(_INT32)
        if count == -1:
            return count
        return bounded_count(count, self.end - self.pos, "array", item_bytes)

    def compact_array_length(self, item_bytes: int = 1) -> int:
        count = self.unsigned_varint() - 1
        if count == -1:
            return count
        return bounded_count(count, self.end - self.pos, "array", item_bytes)

    def tagged_field_count(self) -> int:
        # A tagged field takes at least its tag and its size.
        return bounded_count(self.unsigned_varint(), self.end - self.pos, "tagged field", 2)

    def array(self, read_item: Callable[[], T]) -> list[T] | None:
        """A classic array read item by item; null (-1) is None."""
        count = self.array_length()
        if count == -1:
            return None
        return [read_item() for _ in range(count)]

    def expect_end(self) -> None:
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} unexpected bytes after the message")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.tagged_field_count()):
            self.unsigned_varint()
            self.take(self.unsigned_varint())


def read_tagged(
    reader: Reader, known: dict[int, tuple[str, Callable[[Reader], Any]]], values: dict[str, Any]
) -> None:
    """A flexible struct's tagged fields: the known ones into `values`, others skipped."""
    for _ in range(reader.tagged_field_count()):
        tag = reader.unsigned_varint()
        size = reader.unsigned_varint()
        entry = known.get(tag)
        if entry is None:
            reader.take(size)
            continue
        end = reader.pos + size
        if end > reader.end:
            raise ProtocolError(f"tagged field {tag} runs past the frame end")
        inner = Reader(reader.view, reader.pos, end)
        values[entry[0]] = entry[1](inner)
        if inner.pos != end:
            raise ProtocolError(f"tagged field {tag} has {end - inner.pos} bytes left over")
        reader.pos = end


def write_tagged(
    writer: Writer, tags: Sequence[tuple[int, str, Any, Callable[[Writer, Any], None]]], obj: Any
) -> None:
    """A flexible struct's tagged fields: those whose value is not their default."""
    present = []
    for tag, attr, default, write in tags:
        value = getattr(obj, attr, default)
        if value != default:
            present.append((tag, value, write))
    writer.unsigned_varint(len(present))
    for tag, value, write in present:
        inner = Writer()
        write(inner, value)
        writer.unsigned_varint(tag)
        writer.unsigned_varint(len(inner))
        for buffer in inner.buffers():
            writer.raw(buffer)
