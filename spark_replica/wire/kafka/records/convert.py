"""Kafka's record batches v2 to replog's stored batches and back.

Both keep the same 61-byte header (spark_replica.records), so a conversion keeps base
offset, leader epoch, producer id/epoch, base sequence, record count, first and max
timestamps, the timestamp type and the transactional bit (so a transaction's batches
stay its own in the log, and Kafka consumers see them as such), and rewrites the
payload, the codec bits and the CRC: varint records (maybe compressed with a Kafka
codec) one way, an Arrow IPC stream (maybe with Arrow buffer compression) the other. A
stored batch remembers the Kafka codec it was produced with (records.PRODUCED_CODEC_MASK),
so that a fetch can send it back compressed alike (`fetch_codec`).

The broker runs these on every produced and every fetched record, so they read and
write whole columns (record_batch, record_writer) rather than records. What a produce
request holds is checked as Kafka's broker checks it, and what comes out passes the
checks replog's leader applies to its own clients' batches
(brokerd.batch_validation), but for the transactional bit, which only the Kafka
listener takes from producers so far. This module does no I/O.
"""

from __future__ import annotations

from spark_replica.errors import CorruptMessageError, CorruptRecordError
from spark_replica.records import (
    COMPRESSION_MASK,
    PRODUCED_CODEC_MASK,
    PRODUCED_CODEC_SHIFT,
    BatchHeader,
    decode_payload,
    encode_batch,
    iter_batches,
    parse_compression,
)
from spark_replica.wire.kafka.records.batch import (
    decode_records,
    iter_kafka_batches,
    read_header,
)
from spark_replica.wire.kafka.records.compress import CODEC_BITS, NONE, compress
from spark_replica.wire.kafka.records.decompress import (
    DEFAULT_MAX_RECORDS_BYTES,
    codec_name,
    decompress,
)
from spark_replica.wire.kafka.records.writer import KEPT_ATTRIBUTES, build_batch, encode_records


def kafka_to_replog(
    records: bytes | bytearray | memoryview,
    store_codec: str = "none",
    max_records_bytes: int = DEFAULT_MAX_RECORDS_BYTES,
) -> bytes:
    """Kafka v2 batches as a producer sent them (one or more) -> replog batches, concatenated.

    Raises CorruptMessageError (framing, CRC-32C, a codec that fails to decompress,
    varints running past the batch, record count mismatch),
    UnsupportedForMessageFormatError (magic 0/1), InvalidRecordError (control batches;
    transactional batches without a producer id; offset deltas not 0..n-1; record count
    and last offset delta disagree; a header key not UTF-8), UnsupportedCompressionTypeError
    (codec bits 5-7),
    MessageTooLargeError (the batches' records, uncompressed, hold more than
    `max_records_bytes` together: the broker passes the topic's max.message.bytes, so
    one partition's records never cost more than that, however many batches they are in).
    store_codec: "none" | "lz4" | "zstd", the Arrow IPC buffer compression of the
    stored batches (ConfigError otherwise).
    """
    store_codec = parse_compression(store_codec, "store_codec")
    converted = []
    budget = max_records_bytes
    for batch in iter_kafka_batches(records):
        header = batch.header
        buffer, size = decompress(batch.codec_bits, batch.records, budget)
        budget -= size
        columns = decode_records(buffer, size, header)
        stored = encode_batch(
            columns,
            base_offset=header.base_offset,
            leader_epoch=header.leader_epoch,
            attributes=(header.attributes & KEPT_ATTRIBUTES) | produced_codec(batch.codec_bits),
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            compression=store_codec,
        )
        converted.append(stored)
    return b"".join(converted)


def produced_codec(bits: int) -> int:
    """The stored attribute bits that remember a produced batch's Kafka codec `bits`."""
    return (bits + 1) << PRODUCED_CODEC_SHIFT


def fetch_codec(attributes: int, compression_type: str) -> int:
    """The Kafka codec a stored batch with `attributes` is fetched with, under the topic's
    compression.type: "producer" keeps the codec the batch was produced with on the
    Kafka listener, else the stored batch's own (none, lz4 or zstd, also Kafka's codec
    numbers); "uncompressed" or a codec name imposes that codec."""
    if compression_type == "producer":
        produced = (attributes & PRODUCED_CODEC_MASK) >> PRODUCED_CODEC_SHIFT
        return produced - 1 if produced else attributes & COMPRESSION_MASK
    if compression_type == "uncompressed":
        return NONE
    return CODEC_BITS[compression_type]


def replog_batch_to_kafka(batch: bytes | bytearray | memoryview, codec: int = NONE) -> bytes:
    """One whole stored batch -> one Kafka v2 batch holding the same records, its records
    compressed with Kafka codec `codec` (compress.py)."""
    try:
        header = BatchHeader.decode(batch)
        records = decode_payload(batch)
    except CorruptRecordError as exc:
        raise CorruptMessageError(str(exc)) from exc
    encoded = encode_records(records, header.first_timestamp)
    return build_batch(header, compress(codec, encoded), codec)


def replog_to_kafka(batches: bytes | bytearray | memoryview, codec: int = NONE) -> bytes:
    """Stored replog batches (whole, as Partition.read returns them) -> Kafka v2 batches.

    With the same base offsets, epochs, producer fields and timestamps; compressed with
    Kafka codec `codec`.
    """
    try:
        stored = list(iter_batches(batches))
    except CorruptRecordError as exc:
        raise CorruptMessageError(str(exc)) from exc
    return b"".join(replog_batch_to_kafka(batch, codec) for _, batch in stored)


def kafka_codec(records: bytes | bytearray | memoryview) -> str:
    """The codec of the first Kafka batch in `records`: "none", "gzip", "snappy", "lz4", "zstd"."""
    header = read_header(memoryview(records).cast("B"), 0)
    return codec_name(header.attributes & 0x07)
