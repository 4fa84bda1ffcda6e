"""Kafka record batches v2: framing, and records read and written a whole column at a time.

A v2 batch is the 61-byte header replog's own batches use (spark_replica.records) followed
by ``record_count`` records, each::

    length          varint   bytes of the record after this field
    attributes      int8     unused
    timestamp_delta varlong  from the batch's first timestamp
    offset_delta    varint   from the batch's base offset: 0..count-1
    key             varint length (-1 = null), bytes
    value           varint length (-1 = null), bytes
    headers         varint count, then per header: varint key length, UTF-8 key,
                    varint value length (-1 = null), value bytes

Varints are zigzag (signed), as in protocol buffers.

Why columns: the broker converts every record it is sent and every record it serves,
so a Python object per record and field would cap it far below the clients' rates. The
only per-record Python step is the walk along the record lengths (each record's start
depends on the previous one's length); every other field is read for all records at
once with numpy, and keys and values become Arrow arrays by one ``take`` over the batch
bytes, which copies each value once. The way out is vectorised the same way: varints are
computed for whole columns, and one ``take`` interleaves them with the keys and values.

Counts are checked before anything is sized from them: a record count against the
records' bytes, a header count against the bytes of the records holding them
(spark_replica.wire.bounds). All reads are bounds-checked: a malformed batch raises
CorruptMessageError, a batch
breaking the format's rules InvalidRecordError, never IndexError or a numpy error. This
module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_replica.errors import (
    CorruptMessageError,
    InvalidRecordError,
    UnsupportedForMessageFormatError,
)
from spark_replica.records import (
    HEADER,
    HEADER_SIZE,
    HEADER_TYPE,
    LENGTH_PREFIX_SIZE,
    MAGIC,
    PAYLOAD_SCHEMA,
    PAYLOAD_SCHEMA_NO_HEADERS,
    TIMESTAMP_TYPE,
    BatchHeader,
    compute_crc,
)
from spark_replica.wire.bounds import MIN_RECORD_BYTES, MIN_RECORD_HEADER_BYTES, bounded_count

MAGIC_OFFSET = 16  # where every message format, v0 to v2, keeps its magic byte
TRANSACTIONAL = 0x10
CONTROL = 0x20
# Zero bytes after the records, so that a vectorised varint read past a record's end
# stays inside the buffer; each such read is checked against the record's end after.
PADDING = 64
_VARINT_BYTES = 5
_VARLONG_BYTES = 10
_HEADER_KEY_TYPE = pa.string()
_HEADER_FIELDS = list(HEADER_TYPE.value_type)
# Fewer records than this still holding headers are read one by one: a record with
# thousands of headers must not cost thousands of whole-column rounds.
_SCALAR_HEADER_RECORDS = 4


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    """One v2 batch as a producer sent it: its header and its (maybe compressed) records."""

    header: BatchHeader
    records: memoryview

    @property
    def codec_bits(self) -> int:
        return self.header.attributes & 0x07


def read_header(view: memoryview, pos: int) -> BatchHeader:
    """The header of the batch at `pos`, its magic and length checked (not its CRC)."""
    left = len(view) - pos
    if left > MAGIC_OFFSET:
        magic = view[pos + MAGIC_OFFSET]
        if magic in (0, 1):
            raise UnsupportedForMessageFormatError(
                f"message format v{magic} (magic {magic}); only record batches v2 are accepted"
            )
        if magic != MAGIC:
            raise CorruptMessageError(f"batch at byte {pos} has unknown magic {magic}")
    if left < HEADER_SIZE:
        raise CorruptMessageError(f"{left} bytes at {pos} are not a whole batch header")
    header = BatchHeader(*HEADER.unpack_from(view, pos))
    if header.batch_length < HEADER_SIZE - LENGTH_PREFIX_SIZE or header.total_size > left:
        raise CorruptMessageError(
            f"batch at byte {pos} declares length {header.batch_length}, {left} bytes present"
        )
    return header


def iter_kafka_batches(records: bytes | bytearray | memoryview) -> Iterator[KafkaBatch]:
    """The batches laid end to end in a produce request's records, each CRC-checked."""
    view = memoryview(records).cast("B")
    pos = 0
    if not view:
        raise CorruptMessageError("the records field holds no batch")
    while pos < len(view):
        header = read_header(view, pos)
        batch = view[pos : pos + header.total_size]
        if compute_crc(batch) != header.crc:
            raise CorruptMessageError(
                f"batch at byte {pos} fails its CRC-32C (stored {header.crc:#010x})"
            )
        check_rules(header)
        yield KafkaBatch(header, batch[HEADER_SIZE:])
        pos += header.total_size


def all_uncompressed(records: bytes | bytearray | memoryview) -> bool:
    """Whether no batch in `records` names a codec: what they cost to convert is then
    known from their size (only the framing is read here, nothing is checked)."""
    view = memoryview(records).cast("B")
    pos = 0
    while pos < len(view):
        header = read_header(view, pos)
        if header.attributes & 0x07:
            return False
        pos += header.total_size
    return True


def has_transactional_batch(records: bytes | bytearray | memoryview) -> bool:
    """Whether a batch in `records` sets the transactional bit: what decides, before any
    record is read, that a Produce needs its transactional id (Kafka's rule). Only the
    framing is read; framing that does not hold ends the look, and the conversion then
    refuses those records for what is wrong with them."""
    view = memoryview(records).cast("B")
    pos = 0
    try:
        while pos < len(view):
            header = read_header(view, pos)
            if header.attributes & TRANSACTIONAL:
                return True
            pos += header.total_size
    except (CorruptMessageError, UnsupportedForMessageFormatError):
        return False
    return False


def check_rules(header: BatchHeader) -> None:
    """Refuse what a producer may not send: control batches (transaction markers are the
    coordinator's to write), transactional batches without a producer id (nothing could
    ever end their transaction), bad counts."""
    if header.attributes & CONTROL:
        raise InvalidRecordError(
            "control batches (transaction markers) are written by the transaction "
            "coordinator only; a producer may not send them"
        )
    if header.attributes & TRANSACTIONAL and header.producer_id < 0:
        raise InvalidRecordError(
            f"a transactional batch needs the producer id InitProducerId gave, not "
            f"{header.producer_id}"
        )
    if header.record_count < 1 or header.last_offset_delta != header.record_count - 1:
        raise InvalidRecordError(
            f"batch counts {header.record_count} records but its last offset delta is "
            f"{header.last_offset_delta}"
        )


def padded(data: bytes | bytearray | memoryview) -> np.ndarray:
    """A copy of `data` followed by PADDING zero bytes, as decode_records needs it."""
    size = len(data)
    buf = np.empty(size + PADDING, np.uint8)
    buf[:size] = np.frombuffer(data, np.uint8)
    buf[size:] = 0
    return buf


# -- reading ---------------------------------------------------------------------------


def _zigzag(raw: np.ndarray) -> np.ndarray:
    return (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)


def _read_varints(
    buf: np.ndarray, pos: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varint at each position, and the position after it."""
    byte = buf[pos]
    raw = (byte & 0x7F).astype(np.uint64)
    more = byte >= 0x80
    after = pos + 1
    shift = 7
    while more.any():
        if shift >= 7 * max_bytes:
            raise CorruptMessageError(f"a varint runs past {max_bytes} bytes")
        byte = buf[after]
        raw |= np.where(more, (byte & 0x7F).astype(np.uint64) << np.uint64(shift), 0).astype(
            np.uint64
        )
        after += more
        more &= byte >= 0x80
        shift += 7
    return _zigzag(raw), after


def _read_raw_varint(buf: memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """One varint at `pos` as stored (zigzag not undone), and the position after it."""
    raw = 0
    for shift in range(0, 7 * max_bytes, 7):
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return raw, pos
    raise CorruptMessageError(f"a varint runs past {max_bytes} bytes")


def _read_varint(buf: memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """One zigzag varint at `pos` (the scalar twin of _read_varints)."""
    raw, pos = _read_raw_varint(buf, pos, max_bytes)
    return (raw >> 1) ^ -(raw & 1), pos


def _walk_lengths(buf: memoryview, count: int) -> tuple[list[int], int]:
    """Each record's length varint as stored, and where the walk ended.

    The one loop that must go record by record, since each record starts where the
    previous one's length says; kept to a list store and an add per record. A negative
    length (odd as stored) is walked as if positive and refused by the caller; a walk
    running off the buffer raises IndexError.
    """
    raws = [0] * count
    pos = 0
    for index in range(count):
        byte = buf[pos]
        if byte < 0x80:
            raws[index] = byte
            pos += 1 + (byte >> 1)
            continue
        second = buf[pos + 1]
        if second < 0x80:
            raw = (byte & 0x7F) | (second << 7)
            pos += 2
        else:
            raw, pos = _read_raw_varint(buf, pos, _VARINT_BYTES)
        raws[index] = raw
        pos += raw >> 1
    return raws, pos


def _record_bodies(buf: memoryview, size: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each record's body (after its length) starts and ends."""
    try:
        raws, end = _walk_lengths(buf, count)
    except IndexError:
        end = -1
    if end != size:
        raise CorruptMessageError(
            f"the batch's {size} bytes of records do not hold the {count} records it declares"
        )
    raw = np.fromiter(raws, np.int64, count)
    if (raw & 1).any():
        raise CorruptMessageError("a record declares a negative length")
    lengths = raw >> 1
    varint_sizes = 1 + (raw >= 1 << 7) + (raw >= 1 << 14) + (raw >= 1 << 21) + (raw >= 1 << 28)
    ends = np.cumsum(varint_sizes + lengths)
    return ends - lengths, ends


def _check_within(pos: np.ndarray, ends: np.ndarray, what: str) -> None:
    if (pos > ends).any():
        raise CorruptMessageError(f"a record's {what} runs past the record's end")


def _read_lengths(
    buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, what: str, nullable: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A length-prefixed field in every record: (lengths, data starts, positions after)."""
    lengths, starts = _read_varints(buf, pos, _VARINT_BYTES)
    if (lengths < (-1 if nullable else 0)).any():
        raise CorruptMessageError(f"a record's {what} has a negative length")
    after = starts + np.maximum(lengths, 0)
    _check_within(after, ends, what)
    return lengths, starts, after


def _binary_column(
    data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, type_: pa.DataType
) -> pa.Array:
    """Values scattered in `data` (in order, not overlapping) as one compact array.

    The values and the gaps between them are read as one array whose offsets alternate
    value start, value end; taking every other element copies just the values. A
    length of -1 is a null value.
    """
    count = len(starts)
    ends = starts + np.maximum(lengths, 0)
    offsets = np.empty(2 * count, np.int32)
    offsets[0::2] = starts
    offsets[1::2] = ends
    spread = pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, pa.py_buffer(offsets), data])
    compact = spread.take(pa.array(np.arange(0, 2 * count, 2, dtype=np.int32)))
    nulls = lengths < 0
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(
        type_, count, [validity, *compact.buffers()[1:]], null_count=null_count
    )


@dataclass(slots=True)
class _Headers:
    """Every header of a batch, record-major: where its key and value lie in the buffer."""

    counts: np.ndarray
    key_lengths: np.ndarray
    key_starts: np.ndarray
    value_lengths: np.ndarray
    value_starts: np.ndarray


def _read_headers(
    buf: np.ndarray, view: memoryview, pos: np.ndarray, ends: np.ndarray
) -> tuple[_Headers | None, np.ndarray]:
    """All records' headers, read round by round (the j-th header of every record at once)."""
    counts, pos = _read_varints(buf, pos, _VARINT_BYTES)
    if (counts < 0).any():
        raise CorruptMessageError("a record has a negative header count")
    _check_within(pos, ends, "header count")
    total = int(counts.sum())
    if total == 0:
        return None, pos
    bounded_count(total, int(ends[-1]), "header", MIN_RECORD_HEADER_BYTES, CorruptMessageError)
    first = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    headers = _Headers(counts, *(np.empty(total, np.int64) for _ in range(4)))
    active = np.flatnonzero(counts)
    at = pos[active]
    round_ = 0
    while active.size >= _SCALAR_HEADER_RECORDS:
        index = first[active] + round_
        limit = ends[active]
        key_lengths, key_starts, at = _read_lengths(buf, at, limit, "header key", False)
        value_lengths, value_starts, at = _read_lengths(buf, at, limit, "header value")
        headers.key_lengths[index] = key_lengths
        headers.key_starts[index] = key_starts
        headers.value_lengths[index] = value_lengths
        headers.value_starts[index] = value_starts
        pos[active] = at
        round_ += 1
        still = counts[active] > round_
        active = active[still]
        at = at[still]
    for record in active.tolist():
        end = int(ends[record])
        position = int(pos[record])
        for header_index in range(int(first[record]) + round_, int(first[record] + counts[record])):
            position = _read_header(view, position, end, headers, header_index)
        pos[record] = position
    return headers, pos


def _read_header(view: memoryview, pos: int, end: int, headers: _Headers, index: int) -> int:
    """One header, for the few records still holding headers after the column rounds."""
    key_length, pos = _read_varint(view, pos, _VARINT_BYTES)
    if key_length < 0 or pos + key_length > end:
        raise CorruptMessageError("a record's header key runs past the record's end")
    headers.key_lengths[index] = key_length
    headers.key_starts[index] = pos
    pos += key_length
    value_length, pos = _read_varint(view, pos, _VARINT_BYTES)
    if value_length < -1 or pos + max(value_length, 0) > end:
        raise CorruptMessageError("a record's header value runs past the record's end")
    headers.value_lengths[index] = value_length
    headers.value_starts[index] = pos
    return pos + max(value_length, 0)


def _header_column(data: pa.Buffer, headers: _Headers) -> pa.Array:
    keys = _binary_column(data, headers.key_starts, headers.key_lengths, _HEADER_KEY_TYPE)
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise InvalidRecordError(f"a header key is not UTF-8: {exc}") from None
    values = _binary_column(data, headers.value_starts, headers.value_lengths, pa.binary())
    entries = pa.StructArray.from_arrays([keys, values], fields=_HEADER_FIELDS)
    counts = headers.counts
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    empty = counts == 0  # no headers reads back as none, as replog's producer writes it
    null_count = int(empty.sum())
    validity = pa.py_buffer(np.packbits(~empty, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(
        HEADER_TYPE,
        len(counts),
        [validity, pa.py_buffer(offsets)],
        null_count=null_count,
        children=[entries],
    )


def decode_records(buf: np.ndarray, size: int, header: BatchHeader) -> pa.RecordBatch:
    """The records of one batch as a payload-shaped Arrow batch (see records.PAYLOAD_SCHEMA).

    `buf` holds the uncompressed records in its first `size` bytes and at least PADDING
    bytes after them. With log append time (attribute bit 0x08) every record's timestamp
    is the batch's max timestamp, as Kafka's readers take it.
    """
    count = bounded_count(
        header.record_count, size, "record", MIN_RECORD_BYTES, CorruptMessageError
    )
    view = memoryview(buf)  # type: ignore[arg-type]  # numpy types ndarray.__buffer__ on 3.12+ only
    starts, ends = _record_bodies(view, size, count)
    timestamp_deltas, pos = _read_varints(buf, starts + 1, _VARLONG_BYTES)
    offset_deltas, pos = _read_varints(buf, pos, _VARINT_BYTES)
    _check_within(pos, ends, "timestamp or offset delta")
    if not np.array_equal(offset_deltas, np.arange(count)):
        raise InvalidRecordError("the records' offset deltas are not 0, 1, 2, ... in order")
    key_lengths, key_starts, pos = _read_lengths(buf, pos, ends, "key")
    value_lengths, value_starts, pos = _read_lengths(buf, pos, ends, "value")
    headers, pos = _read_headers(buf, view, pos, ends)
    if not np.array_equal(pos, ends):
        raise CorruptMessageError("a record's fields do not fill the length it declares")
    data = pa.py_buffer(buf)
    if header.attributes & 0x08:
        timestamps = np.full(count, header.max_timestamp, np.int64)
    else:
        timestamps = timestamp_deltas + header.first_timestamp
    columns = [
        _binary_column(data, key_starts, key_lengths, pa.binary()),
        _binary_column(data, value_starts, value_lengths, pa.binary()),
        pa.Array.from_buffers(TIMESTAMP_TYPE, count, [None, pa.py_buffer(timestamps)]),
    ]
    if headers is None:
        return pa.RecordBatch.from_arrays(columns, schema=PAYLOAD_SCHEMA_NO_HEADERS)
    columns.append(_header_column(data, headers))
    return pa.RecordBatch.from_arrays(columns, schema=PAYLOAD_SCHEMA)
