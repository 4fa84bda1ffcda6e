"""A sealed producer batch: Arrow records are encoded once, already stamped.

The sink hands the producer Arrow batches; encoding them when first sent, with the
identity and sequence in the header from the start, spares the copy and second CRC
pass that stamping an encoded batch costs. These tests fail if the batch is encoded
unstamped (its header would say no producer) or copied to be stamped again.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa

from spark_replica.client.partition_sender import ProducerBatch
from spark_replica.records import BatchHeader, decode_payload, verify_batch
from spark_replica.topics import TopicPartition


def _sealed(records: pa.RecordBatch) -> ProducerBatch:
    loop = asyncio.new_event_loop()
    result: asyncio.Future[int] = loop.create_future()
    loop.close()
    return ProducerBatch(TopicPartition("t", 0), records.num_rows, 0.0, result, records=records)


def test_arrow_records_are_encoded_stamped_and_sent_without_a_copy() -> None:
    values = [b"a", b"bb", None]
    batch = _sealed(pa.record_batch([pa.array(values, pa.binary())], names=["value"]))
    batch.encode("none", 77, 3, 10)
    assert batch.encoded is not None and batch.records is None
    verify_batch(batch.encoded)
    header = BatchHeader.decode(batch.encoded)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 10)
    assert header.record_count == 3
    assert decode_payload(batch.encoded).column("value").to_pylist() == values
    assert batch.stamped(77, 3, 10) is batch.encoded


def test_a_new_sequence_after_encoding_gets_a_stamped_copy() -> None:
    batch = _sealed(pa.record_batch([pa.array([b"x"] * 4, pa.binary())], names=["value"]))
    batch.encode("lz4", 77, 3, 10)
    restamped = batch.stamped(77, 4, 0)
    verify_batch(restamped)
    header = BatchHeader.decode(restamped)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 4, 0)
    assert header.compression == "lz4"
    assert BatchHeader.decode(batch.encoded or b"").base_sequence == 10
