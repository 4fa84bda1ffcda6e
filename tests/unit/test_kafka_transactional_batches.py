"""Transactional batches through the Kafka listener's conversion and produce checks.

A transactional producer's batches (bit 4) keep their bit into the log and back out to
Kafka consumers; control batches never come from producers; a request holding a
transactional batch needs its transactional id and Write on it (Kafka's rule).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from brokerd.kafka.produce import transactional_denied
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import InvalidRecordError, TransactionalIdAuthorizationFailedError
from spark_replica.records import BatchHeader, compute_crc, iter_batches
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.wire.kafka.records.batch import has_transactional_batch
from spark_replica.wire.kafka.records.convert import kafka_to_replog, replog_to_kafka
from spark_replica.wire.schema import Data

BASE_TS = 1_700_000_000_000
PRODUCER_ID, EPOCH = 4000, 3
ATTRIBUTES_OFFSET = 21


def kafka_batch(*, transactional: bool, producer_id: int = PRODUCER_ID, count: int = 2) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=int(transactional),
        producer_id=producer_id,
        producer_epoch=EPOCH if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 20,
    )
    for offset in range(count):
        builder.append(
            offset, timestamp=BASE_TS + offset, key=b"k", value=b"v%d" % offset, headers=[]
        )
    return bytes(builder.build())


def test_a_transactional_batch_is_stored_transactional_and_served_so() -> None:
    stored = kafka_to_replog(kafka_batch(transactional=True))
    [(header, _)] = list(iter_batches(stored))
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        PRODUCER_ID,
        EPOCH,
        0,
    )
    served = DefaultRecordBatch(replog_to_kafka(stored))
    assert served.is_transactional and not served.is_control_batch
    assert served.producer_id == PRODUCER_ID
    assert [record.value for record in served] == [b"v0", b"v1"]


def test_a_plain_batch_stays_plain() -> None:
    header: BatchHeader = next(iter_batches(kafka_to_replog(kafka_batch(transactional=False))))[0]
    assert not header.is_transactional


def test_a_transactional_batch_without_a_producer_id_is_refused() -> None:
    with pytest.raises(InvalidRecordError, match="producer id"):
        kafka_to_replog(kafka_batch(transactional=True, producer_id=-1))


def test_a_control_batch_from_a_producer_is_refused() -> None:
    data = bytearray(kafka_batch(transactional=True))
    data[ATTRIBUTES_OFFSET + 1] |= 0x20
    data[17:21] = compute_crc(data).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="coordinator"):
        kafka_to_replog(bytes(data))


def test_has_transactional_batch_reads_every_batch_header() -> None:
    plain = kafka_batch(transactional=False, producer_id=-1)
    assert not has_transactional_batch(plain + plain)
    assert has_transactional_batch(plain + kafka_batch(transactional=True))
    assert not has_transactional_batch(b"\x00" * 30)


# --------------------------------------------------------------------------- produce


def produce_request(transactional_id: str | None, *records: bytes) -> KafkaRequest:
    partitions = [Data(index=i, records=r) for i, r in enumerate(records)]
    body = Data(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=1000,
        topic_data=[Data(name="t", partition_data=partitions)],
    )
    return KafkaRequest(0, 9, 1, "test", "127.0.0.1", "User:app", body)


def allowing(operation: Operation, transactional_id: str) -> Any:
    authorizer = Authorizer(frozenset())
    pattern = ResourcePattern(ResourceType.TRANSACTIONAL_ID, transactional_id, PatternType.LITERAL)
    entry = AclEntry("User:app", "*", operation, Permission.ALLOW)
    authorizer.replace_all([AclBinding(pattern, entry)])
    return SimpleNamespace(authorizer=authorizer)


def test_a_request_without_transactional_batches_needs_no_transactional_id() -> None:
    plain = kafka_batch(transactional=False)
    ctx: Any = SimpleNamespace(authorizer=Authorizer(frozenset()))
    assert transactional_denied(ctx, produce_request(None, plain)) is None
    assert transactional_denied(ctx, produce_request("tx", plain)) is None


def test_transactional_batches_without_a_transactional_id_are_refused() -> None:
    ctx: Any = SimpleNamespace(authorizer=None)
    request = produce_request(
        None, kafka_batch(transactional=False), kafka_batch(transactional=True)
    )
    denied = transactional_denied(ctx, request)
    assert isinstance(denied, TransactionalIdAuthorizationFailedError)
    assert "no transactional id" in str(denied)


def test_transactional_batches_need_write_on_the_transactional_id() -> None:
    request = produce_request("tx", kafka_batch(transactional=True))
    assert transactional_denied(allowing(Operation.WRITE, "tx"), request) is None
    denied = transactional_denied(allowing(Operation.DESCRIBE, "tx"), request)
    assert isinstance(denied, TransactionalIdAuthorizationFailedError)
    assert transactional_denied(allowing(Operation.WRITE, "other"), request) is not None
