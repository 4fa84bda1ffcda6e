"""The record batch: replog's unit of storage, replication and transfer.

A batch is a fixed 61-byte big-endian header followed by a payload::

    base_offset        int64   offset of the first record (set by the leader on append)
    batch_length       int32   bytes after this field, i.e. total size - 12
    leader_epoch       int32   epoch of the leader that appended it (set on append)
    magic              int8    format version, MAGIC
    crc                uint32  CRC32C of everything from `attributes` to the end
    attributes         int16   bits 0-2: compression codec (0 none, 3 lz4, 4 zstd);
                               bit 3: timestamp type (0 create time, 1 log append time);
                               bit 4: transactional (Kafka's isTransactional);
                               bit 5: control batch, a transaction marker (Kafka's
                               isControlBatch);
                               bits 8-10: 1 + the Kafka codec a batch produced on the
                               Kafka listener came with (0 otherwise), which Kafka
                               leaves unused, so a fetch can send it back so compressed
    last_offset_delta  int32   record_count - 1
    first_timestamp    int64   timestamp of the first record, ms since the epoch
    max_timestamp      int64   largest timestamp in the batch, ms
    producer_id        int64   -1 when not idempotent
    producer_epoch     int16   -1 when not idempotent
    base_sequence      int32   -1 when not idempotent
    record_count       int32

The layout is Kafka's v2 batch header, so the same reasoning carries over: the CRC
leaves out base offset, length and leader epoch, which the leader rewrites on append
without touching (or re-checksumming) the payload.

The payload is an Arrow IPC stream holding one record batch with the columns of
PAYLOAD_SCHEMA (``headers`` may be left out when no record has any). Brokers read only
the header and move payload bytes untouched; clients turn the payload into a
``pyarrow.RecordBatch`` without copying.

A control batch holds one record whose key and value are the bytes of Kafka's end
transaction marker (see ControlMarker), so a conversion to Kafka's format carries it as
Kafka writes it. It belongs to the producer whose transaction it ends: producer id and
epoch as that producer's batches, base sequence -1.

Compression is Arrow IPC buffer compression (lz4 frame or zstd, per buffer), so any
Arrow reader decompresses it on its own and the CRC covers the compressed bytes, as in
Kafka. The codec is also named in the attributes' low bits, with Kafka's numbers, so
that tools reading headers only can tell compressed batches apart.
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c
import pyarrow as pa

from spark_replica.errors import ConfigError, CorruptRecordError, InvalidControlRecordError

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LENGTH_PREFIX_SIZE = 12  # base_offset + batch_length: the part not counted in batch_length
CRC_START = 21  # attributes begin here: the CRC covers [CRC_START, end)
CRC_FIELD = struct.Struct(">I")
CRC_FIELD_OFFSET = 17
BASE_OFFSET_FIELD = struct.Struct(">q")
LEADER_EPOCH_FIELD = struct.Struct(">i")
LEADER_EPOCH_FIELD_OFFSET = 12
NO_PRODUCER_ID = -1
# Producer ids from here up are derived by Spark sink tasks (connectors' sink identity),
# never allocated by brokers, whose ids count up from 0.
DERIVED_PRODUCER_ID_BASE = 2**62
NO_SEQUENCE = -1
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
COMPRESSION_MASK = 0x07
PRODUCED_CODEC_SHIFT = 8
PRODUCED_CODEC_MASK = 0x0700
# Codec name -> the attributes' compression bits, numbered as Kafka numbers them.
COMPRESSION_CODECS = {"none": 0, "lz4": 3, "zstd": 4}
CODEC_NAMES = {bits: name for name, bits in COMPRESSION_CODECS.items()}

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
PAYLOAD_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", TIMESTAMP_TYPE),
        ("headers", HEADER_TYPE),
    ]
)
PAYLOAD_SCHEMA_NO_HEADERS = pa.schema(list(PAYLOAD_SCHEMA)[:3])


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded fixed header of one batch."""

    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> str:
        """The codec named in the attributes ("none", "lz4", "zstd"), or "unknown-N"."""
        bits = self.attributes & COMPRESSION_MASK
        return CODEC_NAMES.get(bits, f"unknown-{bits}")

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def total_size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LENGTH_PREFIX_SIZE

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Decode the header at `pos`; raises CorruptRecordError if it cannot be one."""
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left at {pos}"
            )
        header = cls(*HEADER.unpack_from(buf, pos))
        if header.magic != MAGIC:
            raise CorruptRecordError(f"batch at {pos} has magic {header.magic}, expected {MAGIC}")
        if header.batch_length < HEADER_SIZE - LENGTH_PREFIX_SIZE:
            raise CorruptRecordError(f"batch at {pos} has impossible length {header.batch_length}")
        if header.record_count < 1 or header.last_offset_delta != header.record_count - 1:
            raise CorruptRecordError(
                f"batch at {pos} has record_count {header.record_count} and "
                f"last_offset_delta {header.last_offset_delta}"
            )
        return header


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC32C of the part of a whole batch that the CRC covers."""
    return crc32c.crc32c(memoryview(batch)[CRC_START:])


def verify_batch(batch: bytes | bytearray | memoryview, header: BatchHeader | None = None) -> None:
    """Raise CorruptRecordError unless `batch` is exactly one whole batch with a good CRC."""
    header = header or BatchHeader.decode(batch)
    if len(batch) != header.total_size:
        raise CorruptRecordError(
            f"batch declares {header.total_size} bytes but {len(batch)} are present"
        )
    actual = compute_crc(batch)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} fails CRC32C: "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )


def iter_batches(
    buf: bytes | bytearray | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Walk the batches laid end to end in `buf`, yielding each header and its bytes.

    Headers only: CRCs are not checked here (see verify_batch). A broker's fetch
    response may end inside a batch when it was cut at max bytes; pass
    ``allow_partial_tail`` to stop quietly there instead of raising.
    """
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < HEADER_SIZE:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{end - pos} trailing bytes are not a whole batch header")
        header = BatchHeader.decode(view, pos)
        batch_end = pos + header.total_size
        if batch_end > end:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"batch at byte {pos} declares {header.total_size} bytes, only {end - pos} present"
            )
        yield header, view[pos:batch_end]
        pos = batch_end


def runs_within(buf: bytes | bytearray | memoryview, limit: int) -> Iterator[memoryview]:
    """Cut whole batches laid end to end into consecutive runs of at most `limit` bytes.

    A follower's fetch answer can hold more than a log segment takes in one append
    (`segment.bytes`); appended run by run, the log rolls between them. A single batch
    larger than `limit` is a run of its own, for the log to accept or refuse.
    """
    view = memoryview(buf)
    if len(view) <= limit:
        if view:
            yield view
        return
    start = end = 0
    for _, batch in iter_batches(view):
        if end > start and end - start + len(batch) > limit:
            yield view[start:end]
            start = end
        end += len(batch)
    if end > start:
        yield view[start:end]


def set_base_offset(batch: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Stamp the offset a leader assigns; outside the CRC, so the payload stays untouched."""
    BASE_OFFSET_FIELD.pack_into(batch, pos, base_offset)


def set_leader_epoch(batch: bytearray | memoryview, leader_epoch: int, pos: int = 0) -> None:
    """Stamp the epoch of the appending leader; outside the CRC like the base offset."""
    LEADER_EPOCH_FIELD.pack_into(batch, pos + LEADER_EPOCH_FIELD_OFFSET, leader_epoch)


_HEADER_SPACE = bytes(HEADER_SIZE)
PRODUCER_FIELDS = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
PRODUCER_FIELDS_OFFSET = 43


def _bytes_view(buffer: pa.Buffer) -> memoryview:
    """A writable view of an Arrow buffer as unsigned bytes, like a bytearray's."""
    return memoryview(buffer).cast("B")


def stamp_producer(
    batch: bytes | bytearray | memoryview, producer_id: int, producer_epoch: int, base_sequence: int
) -> memoryview:
    """A copy of a whole batch carrying an idempotent producer's identity and sequence.

    These fields are inside the CRC (the broker dedupes on them, so they must not be
    corruptible silently), so the CRC is computed again: one pass at memory speed. The
    copy lives in Arrow's memory pool, which reuses freed blocks: a fresh 1 MB bytearray
    would cost more in page faults than the copy itself.
    """
    view = _bytes_view(pa.allocate_buffer(len(batch)))
    view[:] = batch
    PRODUCER_FIELDS.pack_into(
        view, PRODUCER_FIELDS_OFFSET, producer_id, producer_epoch, base_sequence
    )
    CRC_FIELD.pack_into(view, CRC_FIELD_OFFSET, compute_crc(view))
    return view.toreadonly()


class ControlType(enum.IntEnum):
    """What ended a transaction: the type field of Kafka's control record key."""

    ABORT = 0
    COMMIT = 1


CONTROL_RECORD_VERSION = 0
CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class ControlMarker:
    """The end of one producer's transaction on a partition: the one record of a control
    batch. The coordinator epoch lets a partition refuse a marker from a coordinator that
    a newer one has since replaced."""

    control_type: ControlType
    coordinator_epoch: int

    @property
    def key(self) -> bytes:
        return CONTROL_KEY.pack(CONTROL_RECORD_VERSION, self.control_type)

    @property
    def value(self) -> bytes:
        return CONTROL_VALUE.pack(CONTROL_RECORD_VERSION, self.coordinator_epoch)


def build_control_batch(
    marker: ControlMarker, *, producer_id: int, producer_epoch: int, timestamp_ms: int
) -> bytes:
    """A control batch ending `producer_id`'s transaction, transactional as Kafka's are.

    It carries no sequence: markers are written by the coordinator, not the producer,
    and do not take part in the producer's numbering.
    """
    return build_batch(
        [marker.value],
        keys=[marker.key],
        timestamps=[timestamp_ms],
        attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
    )


def decode_control_marker(batch: bytes | bytearray | memoryview) -> ControlMarker:
    """The marker a whole control batch holds; InvalidControlRecordError if it holds none.

    Versions above 0 are read by their version-0 fields, as Kafka reads them, so that a
    later marker layout that only adds fields stays readable.
    """
    header = BatchHeader.decode(batch)
    where = f"control batch at offset {header.base_offset}"
    if not header.is_control:
        raise InvalidControlRecordError(
            f"batch at offset {header.base_offset} is not a control batch"
        )
    if header.producer_id < 0 or header.producer_epoch < 0:
        raise InvalidControlRecordError(
            f"{where} names producer id {header.producer_id} epoch {header.producer_epoch}"
        )
    records = decode_payload(batch)
    if records.num_rows != 1:
        raise InvalidControlRecordError(f"{where} holds {records.num_rows} records, not 1")
    key = records.column("key")[0].as_py()
    value = records.column("value")[0].as_py()
    if key is None or len(key) < CONTROL_KEY.size:
        raise InvalidControlRecordError(f"{where} has a {_size(key)} key, not {CONTROL_KEY.size}")
    if value is None or len(value) < CONTROL_VALUE.size:
        raise InvalidControlRecordError(
            f"{where} has a {_size(value)} value, not {CONTROL_VALUE.size}"
        )
    key_version, type_code = CONTROL_KEY.unpack_from(key)
    value_version, coordinator_epoch = CONTROL_VALUE.unpack_from(value)
    if key_version < 0 or value_version < 0:
        raise InvalidControlRecordError(
            f"{where} has key version {key_version}, value version {value_version}"
        )
    if type_code not in (ControlType.ABORT, ControlType.COMMIT):
        raise InvalidControlRecordError(
            f"{where} has control type {type_code}; transaction markers are ABORT (0) or COMMIT (1)"
        )
    return ControlMarker(ControlType(type_code), coordinator_epoch)


def _size(field: bytes | None) -> str:
    return "null" if field is None else f"{len(field)}-byte"


def parse_compression(name: str, option: str = "compression") -> str:
    """The codec name if replog knows it; a ConfigError naming `option` otherwise."""
    codec = str(name).strip().lower()
    if codec not in COMPRESSION_CODECS:
        known = ", ".join(COMPRESSION_CODECS)
        raise ConfigError(f"{option}={name!r}: use one of {known}")
    return codec


def _write_payload(sink: pa.NativeFile, records: pa.RecordBatch, codec: str) -> None:
    """Write a payload-shaped record batch as an Arrow IPC stream, buffers compressed."""
    options = pa.ipc.IpcWriteOptions(compression=None if codec == "none" else codec)
    with pa.ipc.new_stream(sink, records.schema, options=options) as writer:
        writer.write_batch(records)


def _write_after_header(records: pa.RecordBatch, codec: str) -> pa.Buffer:
    """A buffer of header space followed by the payload, written in place.

    Uncompressed, the payload's size is known from a dry run (a stream that only
    counts), so the buffer is allocated once at its size; a growing buffer would copy
    the payload each time it doubles. A compressed size is only known by compressing.
    """
    if codec == "none":
        counter = pa.MockOutputStream()
        _write_payload(counter, records, codec)
        buffer = pa.allocate_buffer(HEADER_SIZE + counter.size())
        sink: pa.NativeFile = pa.FixedSizeBufferWriter(buffer)
        sink.write(_HEADER_SPACE)
        _write_payload(sink, records, codec)
        return buffer
    growing = pa.BufferOutputStream()
    growing.write(_HEADER_SPACE)
    _write_payload(growing, records, codec)
    return growing.getvalue()


def encode_batch(
    records: pa.RecordBatch,
    *,
    base_offset: int = 0,
    leader_epoch: int = -1,
    attributes: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    compression: str = "none",
) -> memoryview:
    """Build one whole batch (header + IPC payload) from a payload-shaped record batch.

    `compression` sets the codec of the payload's buffers and the attributes' codec bits
    (any codec bits passed in `attributes` are replaced).

    The batch is written once, header space first, into one buffer of Arrow's memory
    pool, and returned as a read-only view of it: this is the sink's hot path, where each
    further copy (or a fresh bytearray's page faults) costs as much as the encoding.
    """
    count = records.num_rows
    if count < 1:
        raise ValueError("a record batch holds at least one record")
    records = normalise_payload(records)
    timestamps = records.column("timestamp").cast(pa.int64())
    bounds = pa.compute.min_max(timestamps)
    first_ts = timestamps[0].as_py()
    max_ts = bounds["max"].as_py()
    if first_ts is None or max_ts is None:
        raise ValueError("every record needs a timestamp")
    return _encode_payload(
        records,
        first_ts,
        max_ts,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression=compression,
    )


def _encode_payload(
    records: pa.RecordBatch,
    first_ts: int,
    max_ts: int,
    *,
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    compression: str,
) -> memoryview:
    """encode_batch's second half, for records already in the payload schema whose first
    and largest timestamps the caller knows."""
    count = records.num_rows
    codec = parse_compression(compression)
    batch = _bytes_view(_write_after_header(records, codec))
    attributes = (attributes & ~COMPRESSION_MASK) | COMPRESSION_CODECS[codec]
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LENGTH_PREFIX_SIZE,
        leader_epoch,
        MAGIC,
        0,
        attributes,
        count - 1,
        first_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    CRC_FIELD.pack_into(batch, CRC_FIELD_OFFSET, compute_crc(batch))
    return batch.toreadonly()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def normalise_payload(records: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Cast user columns to the payload schema: value required; key, timestamp, headers optional.

    Strings become UTF-8 bytes, integer timestamps are read as milliseconds, and a
    missing timestamp column is filled with the current time.
    """
    if isinstance(records, pa.Table):
        records = records.combine_chunks().to_batches()[0] if records.num_rows else None
        if records is None:
            raise ValueError("a record batch holds at least one record")
    names = records.schema.names
    if "value" not in names:
        raise ValueError("records need a 'value' column")
    count = records.num_rows
    key = records.column("key") if "key" in names else pa.nulls(count, pa.binary())
    value = records.column("value")
    if "timestamp" in names:
        ts = records.column("timestamp")
        if pa.types.is_integer(ts.type):
            ts = ts.cast(pa.int64()).cast(TIMESTAMP_TYPE)
        elif ts.type != TIMESTAMP_TYPE:
            ts = ts.cast(TIMESTAMP_TYPE)
        if ts.null_count:
            ts = pa.compute.fill_null(ts, pa.scalar(now_ms(), TIMESTAMP_TYPE))
    else:
        ts = pa.repeat(pa.scalar(now_ms(), TIMESTAMP_TYPE), count)
    columns = [_as_binary(key, "key"), _as_binary(value, "value"), ts]
    if "headers" in names:
        headers = records.column("headers")
        if headers.type != HEADER_TYPE:
            headers = headers.cast(HEADER_TYPE)
        return pa.RecordBatch.from_arrays([*columns, headers], schema=PAYLOAD_SCHEMA)
    return pa.RecordBatch.from_arrays(columns, schema=PAYLOAD_SCHEMA_NO_HEADERS)


def _as_binary(column: pa.Array, name: str) -> pa.Array:
    if column.type == pa.binary():
        return column
    if pa.types.is_string(column.type) or pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
    if pa.types.is_large_string(column.type) or pa.types.is_null(column.type):
        return column.cast(pa.binary())
    raise ValueError(f"column '{name}' must be binary or string, not {column.type}")


def build_batch(
    values: Sequence[bytes | str | None],
    keys: Sequence[bytes | str | None] | None = None,
    timestamps: Sequence[int | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
    compression: str = "none",
    **header_fields: int,
) -> bytes:
    """Build one batch from Python lists (tests, the CLI, the producer); timestamps in ms."""
    if headers is None and values:
        return _build_plain_batch(values, keys, timestamps, compression, header_fields)
    arrays: dict[str, pa.Array] = {
        "value": pa.array([_to_bytes(v) for v in values], pa.binary()),
    }
    if keys is not None:
        arrays["key"] = pa.array([_to_bytes(k) for k in keys], pa.binary())
    if timestamps is not None:
        arrays["timestamp"] = pa.array(timestamps, pa.int64())
    if headers is not None:
        arrays["headers"] = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
            HEADER_TYPE,
        )
    return bytes(
        encode_batch(pa.RecordBatch.from_pydict(arrays), compression=compression, **header_fields)
    )


def _build_plain_batch(
    values: Sequence[bytes | str | None],
    keys: Sequence[bytes | str | None] | None,
    timestamps: Sequence[int | None] | None,
    compression: str,
    header_fields: dict[str, int],
) -> bytes:
    """build_batch without headers, straight into the payload schema: the offsets
    coordinator builds one such small batch per commit, where normalising through Arrow
    casts cost more than the records."""
    count = len(values)
    if keys is not None and len(keys) != count:
        raise ValueError(f"{len(keys)} keys for {count} values")
    if timestamps is not None and len(timestamps) != count:
        raise ValueError(f"{len(timestamps)} timestamps for {count} values")
    now = now_ms()
    stamps = [now] * count if timestamps is None else [now if t is None else t for t in timestamps]
    columns = [
        pa.nulls(count, pa.binary())
        if keys is None
        else pa.array([_to_bytes(k) for k in keys], pa.binary()),
        pa.array([_to_bytes(v) for v in values], pa.binary()),
        pa.array(stamps, TIMESTAMP_TYPE),
    ]
    records = pa.RecordBatch.from_arrays(columns, schema=PAYLOAD_SCHEMA_NO_HEADERS)
    fields = {
        "base_offset": 0,
        "leader_epoch": -1,
        "attributes": 0,
        "producer_id": NO_PRODUCER_ID,
        "producer_epoch": -1,
        "base_sequence": NO_SEQUENCE,
    } | header_fields
    return bytes(
        _encode_payload(records, stamps[0], max(stamps), compression=compression, **fields)
    )


def _to_bytes(item: bytes | str | None) -> bytes | None:
    if item is None or isinstance(item, bytes):
        return item
    return item.encode("utf-8")


def decode_payload(batch: bytes | bytearray | memoryview) -> pa.RecordBatch:
    """The records of one whole batch as an Arrow record batch, sharing `batch`'s memory."""
    header = BatchHeader.decode(batch)
    payload = pa.py_buffer(memoryview(batch)[HEADER_SIZE : header.total_size])
    try:
        reader = pa.ipc.open_stream(payload)
        records = reader.read_next_batch()
    except (pa.ArrowException, OSError, StopIteration, ValueError) as exc:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset}: bad payload: {exc}"
        ) from exc
    if records.num_rows != header.record_count:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} declares {header.record_count} records "
            f"but its payload holds {records.num_rows}"
        )
    return records
