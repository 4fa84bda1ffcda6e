"""Kafka record batches v2 written from Arrow columns, a whole column at a time.

The record layout is in record_batch's notes. Every varint of the batch is computed for
whole columns with numpy (zigzag, then 7-bit groups, then the groups each value needs).
The records section is then one Arrow ``take``: a source array holds every run of
varints, key, value, header key and header value as elements, and the take lists them
in the order the records lay them out, copying each value once. No Python object is
built per record. This module does no I/O.
"""

from __future__ import annotations

import functools

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_replica.records import (
    CONTROL_FLAG,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LENGTH_PREFIX_SIZE,
    MAGIC,
    TIMESTAMP_TYPE_LOG_APPEND,
    TRANSACTIONAL_FLAG,
    BatchHeader,
)

# What a converted batch keeps of the other format's attributes: the timestamp type and
# the transactional and control bits, which both formats place alike. The codec bits are
# the new batch's own.
KEPT_ATTRIBUTES = TIMESTAMP_TYPE_LOG_APPEND | TRANSACTIONAL_FLAG | CONTROL_FLAG
# Pieces each record lays out before its headers: lead varints (length, attributes,
# timestamp delta, offset delta, key length), key, value length, value, header count.
_RECORD_PIECES = 5
# Pieces of each header: key length, key, value length, value.
_HEADER_PIECES = 4


class _Column:
    """A binary or string column as Kafka writes it: bytes, offsets, null rows."""

    __slots__ = ("data", "lengths", "nulls", "offsets")

    def __init__(self, column: pa.Array) -> None:
        count = len(column)
        if pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.binary())
        _, offsets_buffer, data_buffer = column.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int32, count + 1, column.offset * 4)
        first = int(offsets[0])
        data = (
            np.empty(0, np.uint8) if data_buffer is None else np.frombuffer(data_buffer, np.uint8)
        )
        self.data = data[first : int(offsets[-1])]
        self.offsets = offsets.astype(np.int64) - first
        self.lengths = np.diff(self.offsets)
        self.nulls = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None

    def written_lengths(self, null_length: int = -1) -> np.ndarray:
        """Lengths as the records carry them: -1 (or `null_length`) for a null."""
        if self.nulls is None:
            return self.lengths
        lengths = self.lengths.copy()
        lengths[self.nulls] = null_length
        return lengths


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints of a column: a (rows, width) byte matrix and each row's byte count."""
    values = values.astype(np.int64, copy=False)
    raw = ((values << 1) ^ (values >> 63)).view(np.uint64)
    largest = int(raw.max()) if raw.size else 0
    if largest < 0x80:  # the common case: one byte each
        return raw.astype(np.uint8)[:, None], np.ones(len(raw), np.int64)
    width = (largest.bit_length() + 6) // 7
    groups = raw[:, None] >> np.arange(0, 7 * width, 7, dtype=np.uint64)
    matrix = (groups & np.uint64(0x7F)).astype(np.uint8)
    more = groups[:, 1:] != 0  # a byte is followed by another while higher bits remain
    matrix[:, :-1] |= more.view(np.uint8) << 7
    return matrix, 1 + more.sum(axis=1, dtype=np.int64)


@functools.lru_cache(maxsize=16)
def _offset_deltas(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Varints of 0..count-1: the same for every batch of `count` records."""
    return _varints(np.arange(count))


def _runs(*columns: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Varint columns side by side, row by row: the bytes and the offsets of each row's run."""
    if len(columns) == 1 and columns[0][0].shape[1] == 1:  # one byte per row
        return columns[0][0][:, 0], np.arange(len(columns[0][0]) + 1)
    matrix = np.hstack([bytes_ for bytes_, _ in columns])
    used = np.hstack([np.arange(bytes_.shape[1]) < sizes[:, None] for bytes_, sizes in columns])
    offsets = np.zeros(len(matrix) + 1, np.int64)
    np.cumsum(sum(sizes for _, sizes in columns), out=offsets[1:])
    return matrix[used], offsets


def _timestamps(column: pa.Array, fallback: int) -> np.ndarray:
    as_int = column.view(pa.int64())
    if as_int.null_count:
        as_int = pc.fill_null(as_int, fallback)
    return as_int.to_numpy(zero_copy_only=False)


def _segment_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of `values` over consecutive segments starting at `starts` (plus a final end)."""
    totals = np.zeros(len(values) + 1, np.int64)
    np.cumsum(values, out=totals[1:])
    return totals[starts[1:]] - totals[starts[:-1]]


def _source(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[pa.Array, list[int], int]:
    """One binary array of every piece kind's elements, and where each kind's start.

    A final empty element stands in for null keys and values.
    """
    data = np.concatenate([bytes_ for bytes_, _ in pieces])
    bases = [0]
    position = 0
    starts = []
    for bytes_, offsets in pieces:
        starts.append(offsets[:-1] + position)
        position += len(bytes_)
        bases.append(bases[-1] + len(offsets) - 1)
    starts.append(np.array([position, position], np.int64))
    all_offsets = np.concatenate(starts).astype(np.int32)
    empty = bases.pop()
    array = pa.Array.from_buffers(
        pa.binary(), empty + 1, [None, pa.py_buffer(all_offsets), pa.py_buffer(data)]
    )
    return array, bases, empty


def encode_records(records: pa.RecordBatch, base_timestamp: int) -> pa.Buffer:
    """The records section of a v2 batch (uncompressed) holding `records`' rows.

    `records` is payload-shaped (key, value, timestamp, optional headers); timestamps are
    written as deltas from `base_timestamp`, offsets as deltas 0..rows-1. A header with a
    null key, which Kafka cannot express, is written with an empty one.
    """
    count = records.num_rows
    rows = np.arange(count)
    keys = _Column(records.column("key"))
    values = _Column(records.column("value"))
    if "headers" in records.schema.names:
        headers = records.column("headers")
        header_counts = pc.fill_null(headers.value_lengths(), 0).to_numpy(zero_copy_only=False)
        key_column, value_column = headers.flatten().flatten()
        header_keys, header_values = _Column(key_column), _Column(value_column)
    else:
        header_counts = np.zeros(count, np.int64)
        header_keys = header_values = _Column(pa.array([], pa.binary()))
    first_header = np.zeros(count + 1, np.int64)
    np.cumsum(header_counts, out=first_header[1:])

    key_lengths = keys.written_lengths()
    value_lengths = values.written_lengths()
    header_key_lengths = header_keys.written_lengths(null_length=0)
    header_value_lengths = header_values.written_lengths()
    header_key_varints = _varints(header_key_lengths)
    header_value_varints = _varints(header_value_lengths)
    header_sizes = (
        header_key_varints[1]
        + header_key_lengths
        + header_value_varints[1]
        + np.maximum(header_value_lengths, 0)
    )
    value_varints = _varints(value_lengths)
    count_varints = _varints(header_counts)
    deltas = (
        (np.zeros((count, 1), np.uint8), np.ones(count, np.int64)),  # attributes
        _varints(_timestamps(records.column("timestamp"), base_timestamp) - base_timestamp),
        _offset_deltas(count),
        _varints(key_lengths),
    )
    body_sizes = (
        sum(sizes for _, sizes in deltas)
        + np.maximum(key_lengths, 0)
        + value_varints[1]
        + np.maximum(value_lengths, 0)
        + count_varints[1]
        + _segment_sums(header_sizes, first_header)
    )
    source, bases, empty = _source(
        [
            _runs(_varints(body_sizes), *deltas),
            (keys.data, keys.offsets),
            _runs(value_varints),
            (values.data, values.offsets),
            _runs(count_varints),
            _runs(header_key_varints),
            (header_keys.data, header_keys.offsets),
            _runs(header_value_varints),
            (header_values.data, header_values.offsets),
        ]
    )
    order = np.empty(_RECORD_PIECES * count + _HEADER_PIECES * len(header_sizes), np.int32)
    record_at = _RECORD_PIECES * rows + _HEADER_PIECES * first_header[:-1]
    for piece, column in enumerate((None, keys, None, values, None)):
        _place(order, record_at + piece, bases[piece] + rows, column, empty)
    if len(header_sizes):
        header_rows = np.arange(len(header_sizes))
        owner = np.repeat(rows, header_counts)
        header_at = _RECORD_PIECES * (owner + 1) + _HEADER_PIECES * header_rows
        for piece, column in enumerate((None, header_keys, None, header_values)):
            _place(order, header_at + piece, bases[5 + piece] + header_rows, column, empty)
    taken = source.take(pa.array(order))
    size = int(np.frombuffer(taken.buffers()[1], np.int32, count=1, offset=4 * len(order))[0])
    return taken.buffers()[2][:size]


def _place(
    order: np.ndarray, at: np.ndarray, elements: np.ndarray, column: _Column | None, empty: int
) -> None:
    """Put a piece kind's element indices in the take order; a null row takes nothing."""
    if column is not None and column.nulls is not None:
        elements = np.where(column.nulls, empty, elements)
    order[at] = elements


def build_batch(
    header: BatchHeader, records: pa.Buffer | bytes | memoryview, codec: int = 0
) -> bytes:
    """A whole v2 batch: the stored batch's header fields around a records section, which
    is compressed with Kafka codec `codec` (0: uncompressed).

    Base offset, leader epoch, producer id/epoch, base sequence, timestamps and the
    timestamp type are the stored batch's; length, codec bits and CRC are the new batch's.
    """
    head = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        head,
        0,
        header.base_offset,
        HEADER_SIZE - LENGTH_PREFIX_SIZE + len(records),
        header.leader_epoch,
        MAGIC,
        0,
        (header.attributes & KEPT_ATTRIBUTES) | codec,
        header.record_count - 1,
        header.first_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
    )
    crc = crc32c.crc32c(records, crc32c.crc32c(memoryview(head)[CRC_START:]))
    head[17:21] = crc.to_bytes(4, "big")
    return b"".join((head, memoryview(records)))
