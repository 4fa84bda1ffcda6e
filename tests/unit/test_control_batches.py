"""Transactional and control batches: the attribute bits, the marker record, its errors,
and the Kafka conversion carrying both bits to Kafka's clients.

aiokafka's batch reader is the oracle for what a Kafka consumer is sent.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from brokerd.core.batch_validation import validate_produced
from spark_replica.errors import CorruptRecordError, InvalidControlRecordError, InvalidRecordError
from spark_replica.records import (
    CONTROL_FLAG,
    HEADER_SIZE,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    ControlMarker,
    ControlType,
    build_batch,
    build_control_batch,
    decode_control_marker,
    decode_payload,
    encode_batch,
)
from spark_replica.wire.kafka.records.convert import replog_batch_to_kafka

TS = 1_700_000_000_000


def control_batch(key: bytes | None, value: bytes | None, rows: int = 1, **fields: int) -> bytes:
    """A control batch whose records are whatever the test says, not a good marker."""
    return build_batch(
        [value] * rows,
        keys=[key] * rows,
        timestamps=[TS] * rows,
        attributes=fields.pop("attributes", CONTROL_FLAG | TRANSACTIONAL_FLAG),
        producer_id=fields.pop("producer_id", 7),
        producer_epoch=fields.pop("producer_epoch", 1),
    )


@pytest.mark.parametrize("control_type", list(ControlType))
def test_a_marker_round_trips_through_its_control_batch(control_type: ControlType) -> None:
    marker = ControlMarker(control_type, coordinator_epoch=12)
    batch = build_control_batch(marker, producer_id=7, producer_epoch=3, timestamp_ms=TS)
    header = BatchHeader.decode(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (7, 3)
    assert header.base_sequence == NO_SEQUENCE
    assert header.record_count == 1
    assert decode_control_marker(batch) == marker


def test_the_marker_record_is_kafkas_end_transaction_marker() -> None:
    batch = build_control_batch(
        ControlMarker(ControlType.COMMIT, 5), producer_id=1, producer_epoch=0, timestamp_ms=TS
    )
    record = decode_payload(batch).to_pylist()[0]
    assert record["key"] == struct.pack(">hh", 0, 1)
    assert record["value"] == struct.pack(">hi", 0, 5)


def test_data_batches_are_neither_transactional_nor_control_unless_marked() -> None:
    plain = BatchHeader.decode(build_batch([b"v"]))
    assert not plain.is_transactional and not plain.is_control
    records = pa.RecordBatch.from_pydict({"value": [b"v"]})
    transactional = BatchHeader.decode(
        encode_batch(records, attributes=TRANSACTIONAL_FLAG, compression="zstd")
    )
    assert transactional.is_transactional and not transactional.is_control
    assert transactional.compression == "zstd"


def test_a_newer_marker_version_is_read_by_its_first_fields() -> None:
    batch = control_batch(struct.pack(">hh", 1, 0) + b"later", struct.pack(">hi", 2, 9) + b"x")
    assert decode_control_marker(batch) == ControlMarker(ControlType.ABORT, 9)


GOOD_KEY = struct.pack(">hh", 0, 0)
GOOD_VALUE = struct.pack(">hi", 0, 1)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (build_batch([GOOD_VALUE], keys=[GOOD_KEY]), "is not a control batch"),
        (control_batch(GOOD_KEY, GOOD_VALUE, rows=2), "holds 2 records, not 1"),
        (control_batch(None, GOOD_VALUE), "null key"),
        (control_batch(b"\x00\x00\x00", GOOD_VALUE), "3-byte key"),
        (control_batch(GOOD_KEY, b"\x00\x00"), "2-byte value"),
        (control_batch(GOOD_KEY, None), "null value"),
        (control_batch(struct.pack(">hh", 0, 2), GOOD_VALUE), "control type 2"),
        (control_batch(struct.pack(">hh", -1, 0), GOOD_VALUE), "key version -1"),
        (control_batch(GOOD_KEY, struct.pack(">hi", -3, 0)), "value version -3"),
        (control_batch(GOOD_KEY, GOOD_VALUE, producer_id=-1), "producer id -1"),
    ],
)
def test_a_malformed_marker_is_a_typed_error(batch: bytes, message: str) -> None:
    with pytest.raises(InvalidControlRecordError, match=message):
        decode_control_marker(batch)


def test_a_control_batch_with_a_bad_payload_is_corrupt() -> None:
    batch = bytearray(control_batch(GOOD_KEY, GOOD_VALUE))
    batch[HEADER_SIZE:] = b"\xff" * (len(batch) - HEADER_SIZE)
    with pytest.raises(CorruptRecordError):
        decode_control_marker(batch)


def test_a_kafka_consumer_is_sent_the_marker_as_kafka_writes_it() -> None:
    marker = ControlMarker(ControlType.ABORT, 4)
    batch = build_control_batch(marker, producer_id=9, producer_epoch=2, timestamp_ms=TS)
    kafka = DefaultRecordBatch(replog_batch_to_kafka(batch))
    assert kafka.is_control_batch and kafka.is_transactional
    assert (kafka.producer_id, kafka.producer_epoch) == (9, 2)
    (record,) = list(kafka)
    assert (record.key, record.value) == (marker.key, marker.value)


def test_a_transactional_data_batch_reaches_kafka_consumers_as_transactional() -> None:
    records = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "timestamp": [TS, TS]})
    batch = encode_batch(
        records, attributes=TRANSACTIONAL_FLAG, producer_id=3, producer_epoch=0, base_sequence=0
    )
    kafka = DefaultRecordBatch(replog_batch_to_kafka(batch))
    assert kafka.is_transactional and not kafka.is_control_batch
    assert [r.value for r in kafka] == [b"a", b"b"]


@pytest.mark.parametrize("transactional_id", [None, "txn"])
def test_producers_cannot_append_control_batches(transactional_id: str | None) -> None:
    batch = build_batch([b"v"], attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG, producer_id=7)
    with pytest.raises(InvalidRecordError, match="not accepted from producers"):
        validate_produced(batch, transactional_id)


def test_a_transactional_batch_needs_the_requests_transactional_id_and_a_producer_id() -> None:
    batch = build_batch([b"v"], attributes=TRANSACTIONAL_FLAG, producer_id=7, producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="Produce version 1"):
        validate_produced(batch)
    validate_produced(batch, "txn")
    anonymous = build_batch([b"v"], attributes=TRANSACTIONAL_FLAG)
    with pytest.raises(InvalidRecordError, match="needs the producer id"):
        validate_produced(anonymous, "txn")
