"""Record batches that lie: compression bombs and record counts far beyond their bytes.

Both listeners take batches with Kafka's v2 header, but their payloads differ: a Kafka
batch carries Kafka's varint records (compressed as one stream: gzip, zstd), a replog
batch an Arrow IPC stream (its buffers compressed one by one). A bomb is a batch of a
few kilobytes holding one record of `size` zero bytes; a count lie is a small valid
batch whose header claims 2^31-1 records.

The Kafka bombs are compressed as a stream, a block of zeros at a time, so that making
a 256 MiB one takes a fraction of a second and no 256 MiB buffer; the Arrow bomb has to
build its value column, so its size is kept to what the machine lends without notice.
Each is built once per process (`functools.cache`). Nothing here does I/O.
"""

from __future__ import annotations

import zlib
from functools import cache

import cramjam
import crc32c

from spark_replica.records import CRC_FIELD, CRC_FIELD_OFFSET, CRC_START, HEADER, build_batch

INT32_MAX = 2**31 - 1
MAGIC = 2
GZIP, ZSTD = 1, 4
CODECS = {"gzip": GZIP, "zstd": ZSTD}
# Kafka's record-count field and last-offset delta, by byte offset in the header.
LAST_OFFSET_DELTA_AT, RECORD_COUNT_AT = 23, 57
STAMP_MS = 1_700_000_000_000
ZERO_BLOCK = bytes(1 << 20)
GZIP_WBITS = 31  # zlib's window bits for the gzip container, as Kafka's gzip codec writes


def varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def kafka_record(offset_delta: int, value: bytes | None, key: bytes | None = None) -> bytes:
    """One v2 record: its length, then attributes, deltas, key, value, no headers."""
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(0)
    return varint(len(body)) + body


def kafka_batch(records: bytes, count: int, codec: int = 0) -> bytes:
    """A v2 batch around `records` (already compressed if `codec`), its CRC right."""
    length = HEADER.size - 12 + len(records)
    header = HEADER.pack(
        0, length, -1, MAGIC, 0, codec, count - 1, STAMP_MS, STAMP_MS, -1, -1, -1, count
    )
    batch = bytearray(header + records)
    CRC_FIELD.pack_into(batch, CRC_FIELD_OFFSET, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def kafka_records_batch(count: int, codec: int = 0) -> bytes:
    """A small valid batch of `count` records, as a well-behaved producer sends it."""
    records = b"".join(kafka_record(n, f"fuzz-{n}".encode()) for n in range(count))
    if codec == GZIP:
        records = _gzip_stream([records])
    elif codec == ZSTD:
        records = bytes(cramjam.zstd.compress(records))
    return kafka_batch(records, count, codec)


@cache
def kafka_bomb(codec: int, size: int) -> bytes:
    """A batch of one record of `size` zero bytes, compressed with `codec` (gzip, zstd)."""
    body_head = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(size)
    body_size = len(body_head) + size + 1
    head = varint(body_size) + body_head
    tail = varint(0)
    blocks = _zero_blocks(size)
    if codec == GZIP:
        records = _gzip_stream([head, *blocks, tail])
    else:
        compressor = cramjam.zstd.Compressor()
        for part in (head, *blocks, tail):
            compressor.compress(part)
        records = bytes(compressor.finish())
    return kafka_batch(records, 1, codec)


def _zero_blocks(size: int) -> list[bytes]:
    """`size` zero bytes as views of one shared block (no `size`-byte buffer)."""
    full, rest = divmod(size, len(ZERO_BLOCK))
    return [ZERO_BLOCK] * full + ([ZERO_BLOCK[:rest]] if rest else [])


def _gzip_stream(parts: list[bytes]) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, GZIP_WBITS)
    out = [compressor.compress(part) for part in parts]
    out.append(compressor.flush())
    return b"".join(out)


def claims_records(batch: bytes, count: int = INT32_MAX) -> bytes:
    """`batch` with a header claiming `count` records, its CRC made right again."""
    lying = bytearray(batch)
    lying[LAST_OFFSET_DELTA_AT : LAST_OFFSET_DELTA_AT + 4] = (count - 1).to_bytes(4, "big")
    lying[RECORD_COUNT_AT : RECORD_COUNT_AT + 4] = count.to_bytes(4, "big")
    CRC_FIELD.pack_into(lying, CRC_FIELD_OFFSET, crc32c.crc32c(bytes(lying[CRC_START:])))
    return bytes(lying)


@cache
def kafka_count_lie(codec: int = 0) -> bytes:
    """A batch of one small record (69 bytes uncompressed) claiming 2^31-1 records."""
    return claims_records(kafka_records_batch(1, codec))


@cache
def replog_bomb(size: int) -> bytes:
    """A replog batch of one record of `size` zero bytes, its Arrow buffers zstd'd."""
    return build_batch([bytes(size)], timestamps=[STAMP_MS], compression="zstd")


@cache
def replog_count_lie() -> bytes:
    """A replog batch of one record whose header claims 2^31-1 records."""
    return claims_records(build_batch([b"x"], timestamps=[STAMP_MS]))
