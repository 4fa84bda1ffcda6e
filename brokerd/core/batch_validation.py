"""What a leader checks inside produced batches before it stores them.

The CRC proves only that a batch arrived as its producer checksummed it. A producer can
checksum a payload that is not an Arrow stream, or a header that disagrees with its
payload; stored, such a batch would fail every reader of the partition from then on
and, being replicated, on every replica. So the leader opens each payload once, on
append, and refuses the request unless every batch in it holds exactly what its header
says:

* CORRUPT_MESSAGE: the bytes are not a batch (framing, CRC) or the payload is not one
  readable Arrow IPC stream (cut short, garbage, bytes after its end, a compressed
  buffer that does not decompress, buffers whose offsets point outside them).
* INVALID_RECORD: the payload reads, but breaks a rule of the format: attribute bits
  replog does not define (or a produced Kafka codec that is none of Kafka's), a control
  batch (markers are the coordinator's alone), a transactional batch outside a request
  that names its transactional id or without a producer id, a schema
  other than the payload schema, more than one Arrow record batch, a row count other
  than the header's record count, a null timestamp, or first/max timestamps that are not
  the first and largest of the payload.
* INVALID_RECORD too, for a topic whose cleanup.policy compacts: a record without a
  key (`require_keys`), which compaction could never keep or replace, as Kafka refuses.
* RECORD_TOO_LARGE: compressed payloads declaring more bytes, decompressed, than the
  topic's max.message.bytes, refused from their metadata before anything decompresses.

Only followers' fetches skip this: they copy what a leader already checked.

Cost: the payload is read zero-copy from the request's own buffer (Arrow only
decompresses compressed buffers), checked by Arrow's own validation, and the
timestamps compared with one vectorised max; no Python object is built per record.
This module does no I/O.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from spark_replica.errors import CorruptMessageError, InvalidRecordError, MessageTooLargeError
from spark_replica.payload_bounds import declared_payload_bytes
from spark_replica.records import (
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_SIZE,
    PAYLOAD_SCHEMA,
    PAYLOAD_SCHEMA_NO_HEADERS,
    PRODUCED_CODEC_MASK,
    PRODUCED_CODEC_SHIFT,
    TIMESTAMP_TYPE_LOG_APPEND,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    decode_payload,
    iter_batches,
    verify_batch,
)

DEFINED_ATTRIBUTE_BITS = COMPRESSION_MASK | TIMESTAMP_TYPE_LOG_APPEND | PRODUCED_CODEC_MASK
# 1 + Kafka's highest codec (zstd): the largest produced-codec value a batch may carry.
_MAX_PRODUCED_CODEC = 5
_READ_ERRORS = (pa.ArrowException, OSError, ValueError)


def decompressed_payload_bytes(records: bytes | bytearray | memoryview, limit: int) -> int:
    """The bytes the compressed payloads among `records` declare they hold decompressed;
    MessageTooLargeError (RECORD_TOO_LARGE) when that is more than `limit` in all.

    Call it before validate_produced, which decompresses: Arrow allocates what a payload
    declares (spark_replica.payload_bounds). Uncompressed payloads count nothing here:
    they are read in place. A batch damaged in transit is CORRUPT_MESSAGE here too.
    """
    total = 0
    for header, batch in iter_batches(records):
        if not header.attributes & COMPRESSION_MASK:
            continue
        total += declared_payload_bytes(pa.py_buffer(batch[HEADER_SIZE:]))
        if total > limit:
            verify_batch(batch, header)
            raise MessageTooLargeError(
                f"batch payloads hold {total} bytes decompressed, more than the topic's "
                f"max.message.bytes {limit}"
            )
    return total


def validate_produced(
    records: bytes | bytearray | memoryview, transactional_id: str | None = None
) -> None:
    """Raise CorruptMessageError or InvalidRecordError unless every batch is sound.

    Transactional batches are accepted only from a request that names the producer's
    `transactional_id` (whose Write its listener has checked). The CRC is checked first,
    so that a batch damaged in transit is always answered CORRUPT_MESSAGE, whatever the
    damage makes its payload look like. Compressed payloads are decompressed: bound them
    first (decompressed_payload_bytes).
    """
    for header, batch in iter_batches(records):
        verify_batch(batch, header)
        _check_attributes(header, transactional_id)
        _check_payload(header, _read_payload(header, batch))


def require_keys(records: bytes | bytearray | memoryview, topic: str) -> None:
    """Raise InvalidRecordError if a record of these (checked) batches has no key."""
    for header, batch in iter_batches(records):
        keyless = decode_payload(batch).column("key").null_count
        if keyless:
            raise InvalidRecordError(
                f"topic {topic!r} is compacted (cleanup.policy has compact): every record "
                f"needs a key, and {keyless} of {header.record_count} records of a batch "
                "have none"
            )


def _check_attributes(header: BatchHeader, transactional_id: str | None) -> None:
    if header.attributes & CONTROL_FLAG:
        raise InvalidRecordError(
            "control batches are not accepted from producers: transaction markers are "
            "written by the transaction coordinator"
        )
    if header.attributes & TRANSACTIONAL_FLAG:
        if transactional_id is None:
            raise InvalidRecordError(
                "a transactional batch needs its producer's transactional id in the "
                "request (Produce version 1)"
            )
        if header.producer_id < 0:
            raise InvalidRecordError(
                "a transactional batch needs the producer id its InitProducerId gave"
            )
    undefined = header.attributes & ~DEFINED_ATTRIBUTE_BITS & ~TRANSACTIONAL_FLAG
    if undefined:
        raise InvalidRecordError(
            f"batch sets attribute bits {undefined:#06x}, which replog does not define"
        )
    produced = (header.attributes & PRODUCED_CODEC_MASK) >> PRODUCED_CODEC_SHIFT
    if produced > _MAX_PRODUCED_CODEC:
        raise InvalidRecordError(
            f"batch names produced Kafka codec {produced - 1}; Kafka's are 0-4"
        )
    if header.compression.startswith("unknown"):
        raise InvalidRecordError(
            f"batch names compression codec {header.attributes & COMPRESSION_MASK}; "
            "replog knows none (0), lz4 (3) and zstd (4)"
        )


def _read_payload(header: BatchHeader, batch: memoryview) -> pa.RecordBatch:
    """The payload's one record batch, read in place and validated in full."""
    payload = pa.py_buffer(batch[HEADER_SIZE:])
    source = pa.BufferReader(payload)
    try:
        reader = pa.ipc.open_stream(source)
        if not _is_payload_schema(reader.schema):
            raise InvalidRecordError(
                f"batch payload has schema {reader.schema.to_string(show_schema_metadata=False)!r}"
                "; expected key: binary, value: binary, timestamp: timestamp[ms, UTC] and "
                "optionally headers"
            )
        records = reader.read_next_batch()
        records.validate(full=True)
        if _has_another_batch(reader):
            raise InvalidRecordError("batch payload holds more than one Arrow record batch")
    except StopIteration:
        raise CorruptMessageError(
            "batch payload is an Arrow stream without a record batch"
        ) from None
    except _READ_ERRORS as exc:
        raise CorruptMessageError(f"batch payload is not a readable Arrow stream: {exc}") from exc
    if source.tell() != payload.size:
        raise CorruptMessageError(
            f"batch payload has {payload.size - source.tell()} bytes after its Arrow stream"
        )
    return records


def _is_payload_schema(schema: pa.Schema) -> bool:
    return schema.equals(PAYLOAD_SCHEMA) or schema.equals(PAYLOAD_SCHEMA_NO_HEADERS)


def _has_another_batch(reader: pa.ipc.RecordBatchStreamReader) -> bool:
    try:
        reader.read_next_batch()
    except StopIteration:
        return False
    return True


def _check_payload(header: BatchHeader, records: pa.RecordBatch) -> None:
    if records.num_rows != header.record_count:
        raise InvalidRecordError(
            f"batch header counts {header.record_count} records, its payload holds "
            f"{records.num_rows}"
        )
    timestamps = records.column("timestamp")
    if timestamps.null_count:
        raise InvalidRecordError(f"{timestamps.null_count} records of the batch have no timestamp")
    first = timestamps[0].value
    largest = pc.max(timestamps).value
    if (first, largest) != (header.first_timestamp, header.max_timestamp):
        raise InvalidRecordError(
            f"batch header has first/max timestamps {header.first_timestamp}/"
            f"{header.max_timestamp}, its records {first}/{largest}"
        )
