"""Compression of Kafka record batches' records, for fetched batches.

The inverse of compression.py's decompression, with Kafka's codec numbers (0 none,
1 gzip, 2 snappy, 3 lz4, 4 zstd) and each codec written the way every Kafka client
reads it:

* gzip: one gzip member, zlib's default level (Kafka's `compression.gzip.level` -1).
* snappy: xerial-framed, as Kafka's Java producer writes it (the Java consumer reads
  nothing else reliably; librdkafka and the Python clients read both shapes), in blocks
  of 32 KiB, xerial's default.
* lz4: the LZ4 frame format with independent blocks and no content checksum, as
  Kafka's KafkaLZ4BlockOutputStream writes it: its reader decompresses each block on
  its own, so linked blocks (lz4's default) would not read.
* zstd: one zstd frame at level 3 (Kafka's `compression.zstd.level` default).

The codecs are cramjam's, which release the GIL, so compressing in a worker thread
leaves the event loop free. This module does no I/O.
"""

from __future__ import annotations

import struct
from typing import TypeAlias

import cramjam
import pyarrow as pa

from spark_replica.errors import UnsupportedCompressionTypeError
from spark_replica.wire.kafka.records.decompress import CODEC_NAMES, XERIAL_MAGIC

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
GZIP_LEVEL = 6
ZSTD_LEVEL = 3
XERIAL_BLOCK_BYTES = 32 * 1024
LZ4_FEED_BYTES = 1024 * 1024
# The xerial header: magic, then version 1 and compatible version 1.
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
# Kafka's names for a codec, as compression.type takes them, and their numbers.
CODEC_BITS = {name: bits for bits, name in CODEC_NAMES.items()}
Records: TypeAlias = bytes | bytearray | memoryview | pa.Buffer


def compress(bits: int, records: Records) -> memoryview:
    """Uncompressed records -> the records as a batch of codec `bits` holds them.

    Codec 0 returns a view of `records` itself. UnsupportedCompressionTypeError for
    bits that name no codec.
    """
    view = memoryview(records).cast("B")
    if bits == NONE:
        return view
    if bits == GZIP:
        return memoryview(cramjam.gzip.compress(view, level=GZIP_LEVEL))
    if bits == SNAPPY:
        return memoryview(_xerial_snappy(view))
    if bits == LZ4:
        return _lz4_frame(view)
    if bits == ZSTD:
        return memoryview(cramjam.zstd.compress(view, level=ZSTD_LEVEL))
    raise UnsupportedCompressionTypeError(f"compression codec {bits} is not one of Kafka's (0-4)")


def _lz4_frame(records: memoryview) -> memoryview:
    """One LZ4 frame of independent blocks, fed in slices: cramjam's streaming
    compressor takes only bytes, and copying a slice at a time bounds the extra memory."""
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    for start in range(0, len(records), LZ4_FEED_BYTES):
        compressor.compress(bytes(records[start : start + LZ4_FEED_BYTES]))
    return memoryview(compressor.finish())


def _xerial_snappy(records: memoryview) -> bytes:
    """Raw snappy blocks of XERIAL_BLOCK_BYTES each, behind the xerial header."""
    parts: list[bytes | memoryview] = [XERIAL_HEADER]
    for start in range(0, len(records), XERIAL_BLOCK_BYTES):
        block = cramjam.snappy.compress_raw(records[start : start + XERIAL_BLOCK_BYTES])
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(memoryview(block))
    return b"".join(parts)
