"""Decompression of Kafka record batches' records, bounded in size.

Codecs are Kafka's numbers in the batch attributes' low three bits: 0 none, 1 gzip,
2 snappy, 3 lz4 (frame format), 4 zstd; 5-7 are undefined. The codecs themselves are
cramjam's. Snappy comes in two shapes: raw (librdkafka) and xerial-framed (the Java
client: a 16-byte header starting "\\x82SNAPPY\\x00", then blocks each prefixed with its
int32 length); both are accepted.

Why bounded: a few kilobytes of zeros compress a gigabyte, and the broker decompresses
what any client sends. The bound is the broker's to give: the topic's max.message.bytes,
which the uncompressed records count against as they would against an uncompressed
batch (RECORD_TOO_LARGE past it). Decompression is incremental into a buffer of the
limit plus one byte, allocated but not touched (the kernel maps pages as they are
written); cramjam stops when the buffer is full, so a bomb costs at most the limit in
memory and the time to write that much. The buffer also leaves record_batch.PADDING zero
bytes after the output for its vectorised reads. A first, smaller buffer is tried first
(see FIRST_TRY_BYTES). cramjam releases the GIL while it works, so a caller running this
in a worker thread leaves its event loop free.

This module does no I/O.
"""

from __future__ import annotations

import struct

import cramjam
import numpy as np

from spark_replica.errors import (
    CorruptMessageError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from spark_replica.wire.kafka.records.batch import PADDING, padded

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# The bound of callers that have no topic to take max.message.bytes from (tools, tests).
DEFAULT_MAX_RECORDS_BYTES = 64 * 1024 * 1024
# The first buffer tried: large enough for most batches (a few times their compressed
# size), small enough to come from reused heap memory. Only a batch that overflows it
# is decompressed again into a buffer of the whole limit, whose fresh pages cost more.
FIRST_TRY_BYTES = 1024 * 1024
FIRST_TRY_RATIO = 16
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
    MessageTooLargeError (RECORD_TOO_LARGE) when they hold more than `limit` bytes.
    """
    name = codec_name(bits)
    if bits == 0:
        if len(data) > limit:
            raise _too_large(name, limit)
        return padded(data), len(data)
    first_try = min(limit, max(FIRST_TRY_BYTES, FIRST_TRY_RATIO * len(data)))
    for capacity in dict.fromkeys((first_try, limit)):
        out = np.empty(capacity + 1 + PADDING, np.uint8)
        size = _decompress_into(bits, name, data, out[: capacity + 1])
        if size <= capacity:
            out[size : size + PADDING] = 0
            return out, size
    raise _too_large(name, limit)


def _too_large(name: str, limit: int) -> MessageTooLargeError:
    return MessageTooLargeError(
        f"{name} records hold more than {limit} bytes uncompressed, the most the "
        "topic's max.message.bytes leaves for them"
    )


def _decompress_into(bits: int, name: str, data: memoryview, window: np.ndarray) -> int:
    """Decompress into `window`; its size, or one more than it holds when it overflows."""
    try:
        if bits == 2:
            return _snappy_into(data, window)
        # numpy types ndarray.__buffer__ on Python 3.12+ only; it is a buffer on 3.11 too.
        return int(_DECOMPRESS_INTO[bits](data, window))  # type: ignore[arg-type]
    except cramjam.DecompressionError as exc:
        if "whole buffer" in str(exc) or "smaller than required" in str(exc):
            return len(window) + 1
        raise CorruptMessageError(f"{name} records do not decompress: {exc}") from None


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
    return int(cramjam.snappy.decompress_raw_into(block, out))  # type: ignore[arg-type]  # see _decompress_into
