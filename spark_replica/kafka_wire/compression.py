"""Decompression of Kafka record batches' records, bounded in size.

Codecs are Kafka's numbers in the batch attributes' low three bits: 0 none, 1 gzip,
2 snappy, 3 lz4 (frame format), 4 zstd; 5-7 are undefined. The codecs themselves are
cramjam's. Snappy comes in two shapes: raw (librdkafka) and xerial-framed (the Java
client: a 16-byte header starting "\\x82SNAPPY\\x00", then blocks each prefixed with its
int32 length); both are accepted.

Why bounded: a few kilobytes of zeros compress a gigabyte, and the broker decompresses
what any client sends. Output goes into a buffer of the limit plus one byte, allocated
but not touched (the kernel maps pages as they are written), and cramjam refuses to
write past a buffer's end, so a bomb costs at most the limit in memory. The buffer also
leaves record_batch.PADDING zero bytes after the output for its vectorised reads.

This module does no I/O.
"""

from __future__ import annotations

import struct

import cramjam
import numpy as np

from spark_replica.errors import (
    CorruptMessageError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)
from spark_replica.kafka_wire.record_batch import PADDING, padded

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# Uncompressed records of one batch the broker will hold in memory at most.
DEFAULT_MAX_RECORDS_BYTES = 64 * 1024 * 1024
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, int32 version, int32 compatible version
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
_DECOMPRESS_INTO = {
    1: cramjam.gzip.decompress_into,
    3: cramjam.lz4.decompress_into,
    4: cramjam.zstd.decompress_into,
}


def codec_name(bits: int) -> str:
    """The codec of a batch's attributes' low bits; UnsupportedCompressionTypeError if none."""
    try:
        return CODEC_NAMES[bits]
    except KeyError:
        raise UnsupportedCompressionTypeError(
            f"compression codec {bits} is not one of Kafka's (0-4)"
        ) from None


def decompress(
    bits: int, data: memoryview, limit: int = DEFAULT_MAX_RECORDS_BYTES
) -> tuple[np.ndarray, int]:
    """Records as a batch holds them -> (a buffer holding them uncompressed, their size).

    PADDING zero bytes follow them in the buffer; uncompressed records are copied.

    Raises CorruptMessageError when the bytes do not decompress with their codec and
    RecordListTooLargeError when they would decompress to more than `limit` bytes.
    """
    name = codec_name(bits)
    if bits == 0:  # already in memory: nothing to bound
        return padded(data), len(data)
    out = np.empty(limit + 1 + PADDING, np.uint8)
    window = out[: limit + 1]
    try:
        if bits == 2:
            size = _snappy_into(data, window)
        else:
            size = int(_DECOMPRESS_INTO[bits](data, window))
    except cramjam.DecompressionError as exc:
        if "whole buffer" in str(exc) or "smaller than required" in str(exc):
            raise _too_large(name, limit) from None
        raise CorruptMessageError(f"{name} records do not decompress: {exc}") from None
    if size > limit:
        raise _too_large(name, limit)
    out[size : size + PADDING] = 0
    return out, size


def _too_large(name: str, limit: int) -> RecordListTooLargeError:
    return RecordListTooLargeError(
        f"{name} records decompress to more than {limit} bytes, the most one batch may hold"
    )


def _snappy_into(data: memoryview, out: np.ndarray) -> int:
    """Raw or xerial-framed snappy into `out`; its size."""
    if bytes(data[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _snappy_block_into(data, out)
    pos = _XERIAL_HEADER_SIZE
    size = 0
    while pos < len(data):
        if pos + _XERIAL_BLOCK_LENGTH.size > len(data):
            raise CorruptMessageError("xerial snappy block length is cut short")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(data, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or pos + length > len(data):
            raise CorruptMessageError(f"xerial snappy block of {length} bytes runs past the data")
        size += _snappy_block_into(data[pos : pos + length], out[size:])
        pos += length
    return size


def _snappy_block_into(block: memoryview, out: np.ndarray) -> int:
    """One raw snappy block; its declared length is checked before anything is written."""
    if cramjam.snappy.decompress_raw_len(block) > len(out):
        raise cramjam.DecompressionError("smaller than required")
    return int(cramjam.snappy.decompress_raw_into(block, out))
