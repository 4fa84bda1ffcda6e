"""The records of the internal `__transaction_state` topic, in Kafka's own layouts.

One record per transactional id and change: the key names the id, the value is the
whole of what its coordinator must not lose (the producer id and epoch handed out, the
timeout, the state and the partitions of the open transaction), so that the last record
per key, which compaction keeps, is the id's state; a null value (a tombstone) is an id
expired. The layouts are Kafka's TransactionLogKey and TransactionLogValue, so that
Kafka's tools that read the topic see what they would on Kafka:

- key version 0: `(transactional_id string)`;
- value version 0: `(producer_id int64, producer_epoch int16, transaction_timeout_ms
  int32, transaction_status int8, transaction_partitions [topic string, partition_ids
  [int32]]?, last_update_timestamp_ms int64, start_timestamp_ms int64)`;
- value version 1: the same fields in Kafka's flexible encoding (compact strings and
  arrays, tagged fields), with the previous producer id (tag 0), the next producer id
  (tag 1) and the client's transaction version (tag 2) as tagged fields.

replog writes version 0, as Kafka does below transaction.version 1, and reads both (a
log copied from a newer Kafka cluster). An id a Spark sink's transactions use needs more
(the producers registered in its open transaction, its micro-batch, the last one
committed), stored in a value version of replog's own, SINK_VALUE_VERSION: the version 0
fields followed by `(micro_batch int64, committed_micro_batch int64, participants
[producer_id int64, producer_epoch int16, topic string, partition int32])`. Only brokers
read this topic (Kafka's clients never do), and the number is far above Kafka's versions,
which count up from 0. The partitions are null in an Empty value, as
Kafka writes them. Bytes read back come from the broker's own log, but a damaged record
must still fail as a ProtocolError naming what is wrong, never as an IndexError or a
huge allocation: the tables' engine bounds every count by the bytes that are there.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace

from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.primitives import Buffer, Reader, Writer
from spark_replica.wire.schema import Data, Field, Message

KEY_VERSION = 0
VALUE_VERSION = 0
NEWEST_VALUE_VERSION = 1
NO_PRODUCER_ID = -1
SINK_VALUE_VERSION = 2**15 - 1
_VERSION = struct.Struct(">h")

_KEY = Message("TransactionLogKey", -1, (0, 0), None, [Field("TransactionalId", "string", "0")])
_VALUE = Message(
    "TransactionLogValue",
    -1,
    (0, NEWEST_VALUE_VERSION),
    1,
    [
        Field("ProducerId", "int64", "0+"),
        Field("PreviousProducerId", "int64", "1+", default=NO_PRODUCER_ID, tag=0, tagged="1+"),
        Field("NextProducerId", "int64", "1+", default=NO_PRODUCER_ID, tag=1, tagged="1+"),
        Field("ProducerEpoch", "int16", "0+"),
        Field("TransactionTimeoutMs", "int32", "0+"),
        Field("TransactionStatus", "int8", "0+"),
        Field(
            "TransactionPartitions",
            [Field("Topic", "string", "0+"), Field("PartitionIds", "[]int32", "0+")],
            "0+",
            nullable="0+",
            default=None,
        ),
        Field("TransactionLastUpdateTimestampMs", "int64", "0+"),
        Field("TransactionStartTimestampMs", "int64", "0+"),
        Field("ClientTransactionVersion", "int16", "1+", tag=2, tagged="1+"),
    ],
)
# What SINK_VALUE_VERSION adds after the version 0 fields.
_SINK = Message(
    "ReplogSinkTransaction",
    -1,
    (0, 0),
    None,
    [
        Field("MicroBatch", "int64", "0"),
        Field("CommittedMicroBatch", "int64", "0"),
        Field(
            "Participants",
            [
                Field("ProducerId", "int64", "0"),
                Field("ProducerEpoch", "int16", "0"),
                Field("Topic", "string", "0"),
                Field("Partition", "int32", "0"),
            ],
            "0",
        ),
    ],
)


@dataclass(frozen=True, slots=True, order=True)
class SinkParticipant:
    tp: TopicPartition
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class SinkTransaction:
    """A Spark sink's part of an id's state (replog's value version only)."""

    micro_batch: int
    committed_micro_batch: int
    participants: tuple[SinkParticipant, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """What a transactional id's record stores; `status` is Kafka's state id byte."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    # None where Kafka writes null (an Empty transaction), else in topic, partition order.
    partitions: tuple[TopicPartition, ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    sink: SinkTransaction | None = None  # stored only in SINK_VALUE_VERSION


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + _KEY.to_bytes(
        KEY_VERSION, Data(transactional_id=transactional_id)
    )


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    """The value's bytes at `version` (version 0 leaves out the tagged fields). A value
    with a sink part is written at SINK_VALUE_VERSION and only there: no other version
    could hold it."""
    if version == SINK_VALUE_VERSION or value.sink is not None:
        return _encode_sink_value(value, version)
    if not 0 <= version <= NEWEST_VALUE_VERSION:
        raise ValueError(f"transaction log value version {version} does not exist")
    partitions = None if value.partitions is None else _by_topic(value.partitions)
    data = Data(
        producer_id=value.producer_id,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        transaction_timeout_ms=value.timeout_ms,
        transaction_status=value.status,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=value.last_update_timestamp_ms,
        transaction_start_timestamp_ms=value.start_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )
    writer = Writer()
    writer.int16(version)
    _VALUE.encode(version, data, writer)
    return writer.getvalue()


def _encode_sink_value(value: TransactionLogValue, version: int) -> bytes:
    sink = value.sink
    if sink is None or version != SINK_VALUE_VERSION:
        raise ValueError(
            f"a sink transaction's value is written at version {SINK_VALUE_VERSION} only, "
            f"with its sink part (asked: version {version}, sink part {sink})"
        )
    kafka_fields = encode_value(replace(value, sink=None), 0)
    participants = [
        Data(
            producer_id=p.producer_id,
            producer_epoch=p.producer_epoch,
            topic=p.tp.topic,
            partition=p.tp.partition,
        )
        for p in sink.participants
    ]
    writer = Writer()
    writer.int16(SINK_VALUE_VERSION)
    writer.raw(kafka_fields[_VERSION.size :])
    _SINK.encode(
        0,
        Data(
            micro_batch=sink.micro_batch,
            committed_micro_batch=sink.committed_micro_batch,
            participants=participants,
        ),
        writer,
    )
    return writer.getvalue()


def decode_key(data: Buffer) -> str:
    """The transactional id a record of the topic is about."""
    reader = Reader(data)
    version = reader.int16()
    if version != KEY_VERSION:
        raise ProtocolError(f"transaction log key version {version} is not one replog reads")
    transactional_id: str = _KEY.decode(KEY_VERSION, reader).transactional_id
    _end(reader, "key")
    return transactional_id


def decode_value(data: Buffer) -> TransactionLogValue:
    reader = Reader(data)
    version = reader.int16()
    sink_version = version == SINK_VALUE_VERSION
    if not (0 <= version <= NEWEST_VALUE_VERSION or sink_version):
        raise ProtocolError(f"transaction log value version {version} is not one replog reads")
    decoded = _VALUE.decode(0 if sink_version else version, reader)
    sink = _decode_sink(reader) if sink_version else None
    _end(reader, "value")
    topics = decoded.transaction_partitions
    partitions = None
    if topics is not None:
        partitions = tuple(
            TopicPartition(topic.topic, index) for topic in topics for index in topic.partition_ids
        )
    return TransactionLogValue(
        producer_id=decoded.producer_id,
        producer_epoch=decoded.producer_epoch,
        timeout_ms=decoded.transaction_timeout_ms,
        status=decoded.transaction_status,
        partitions=partitions,
        last_update_timestamp_ms=decoded.transaction_last_update_timestamp_ms,
        start_timestamp_ms=decoded.transaction_start_timestamp_ms,
        previous_producer_id=decoded.previous_producer_id,
        next_producer_id=decoded.next_producer_id,
        client_transaction_version=decoded.client_transaction_version,
        sink=sink,
    )


def _decode_sink(reader: Reader) -> SinkTransaction:
    decoded = _SINK.decode(0, reader)
    participants = tuple(
        SinkParticipant(TopicPartition(p.topic, p.partition), p.producer_id, p.producer_epoch)
        for p in decoded.participants
    )
    return SinkTransaction(decoded.micro_batch, decoded.committed_micro_batch, participants)


def _by_topic(partitions: Iterable[TopicPartition]) -> list[Data]:
    """Kafka's shape: one entry per topic with its partition ids."""
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [Data(topic=topic, partition_ids=ids) for topic, ids in topics.items()]


def _end(reader: Reader, what: str) -> None:
    if reader.remaining():
        raise ProtocolError(f"transaction log {what} has {reader.remaining()} bytes past its end")
