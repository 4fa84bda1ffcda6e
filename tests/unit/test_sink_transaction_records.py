"""replog's own value version of `__transaction_state` for a Spark sink's transactions: laid
out by hand, read back whole and truncated, never written for an id that needs only
Kafka's fields; and the coordinator's metadata stored and replayed through it beside
Kafka's version 0 records of the same partition."""

from __future__ import annotations

import struct

import pytest

from brokerd.transactions.states import Participant, TransactionMetadata, TxnState
from brokerd.transactions.stored_transactions import StoredTransactions, record_of
from spark_replica.errors import ProtocolError
from spark_replica.records import DERIVED_PRODUCER_ID_BASE
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.transaction_records import (
    SINK_VALUE_VERSION,
    SinkParticipant,
    SinkTransaction,
    TransactionLogValue,
    decode_value,
    encode_value,
)

TASK = DERIVED_PRODUCER_ID_BASE + 5
OUT = TopicPartition("out", 2)
SINK = SinkTransaction(7, 6, (SinkParticipant(OUT, TASK, 3),))
VALUE = TransactionLogValue(4001, 1, 60_000, 1, (OUT,), 500, 400, sink=SINK)


def kafka_string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


# VALUE in the sink version: Kafka's version 0 fields, then the sink's.
VALUE_SINK = b"".join(
    [
        struct.pack(">h", SINK_VALUE_VERSION),
        struct.pack(">qhib", 4001, 1, 60_000, 1),
        struct.pack(">i", 1) + kafka_string("out") + struct.pack(">ii", 1, 2),
        struct.pack(">qq", 500, 400),
        struct.pack(">qq", 7, 6),  # micro-batch open, last committed
        struct.pack(">i", 1) + struct.pack(">qh", TASK, 3) + kafka_string("out"),
        struct.pack(">i", 2),
    ]
)


def test_the_sink_version_is_kafkas_version_0_then_the_sink_fields() -> None:
    assert encode_value(VALUE, SINK_VALUE_VERSION) == VALUE_SINK
    assert decode_value(VALUE_SINK) == VALUE


def test_every_truncation_of_a_sink_value_is_a_protocol_error() -> None:
    for end in range(len(VALUE_SINK)):
        with pytest.raises(ProtocolError):
            decode_value(VALUE_SINK[:end])
    with pytest.raises(ProtocolError, match="past its end"):
        decode_value(VALUE_SINK + b"\x00")


def test_a_sink_part_is_written_in_the_sink_version_only() -> None:
    with pytest.raises(ValueError, match="sink transaction's value"):
        encode_value(VALUE, 0)
    with pytest.raises(ValueError, match="sink transaction's value"):
        encode_value(TransactionLogValue(1, 0, 1, 0, None, 0, 0), SINK_VALUE_VERSION)


def metadata(
    state: TxnState,
    participants: frozenset[Participant] = frozenset(),
    micro_batch: int = -1,
    committed_micro_batch: int = -1,
) -> TransactionMetadata:
    return TransactionMetadata(
        "q",
        4001,
        1,
        60_000,
        state,
        frozenset({OUT}),
        400,
        500,
        participants=participants,
        micro_batch=micro_batch,
        committed_micro_batch=committed_micro_batch,
    )


def test_the_coordinator_stores_a_sink_id_in_the_sink_version_and_others_in_kafkas() -> None:
    participants = frozenset({Participant(OUT, TASK, 3), Participant(OUT, TASK + 1, 3)})
    sink = metadata(TxnState.ONGOING, participants=participants, micro_batch=7)
    kafka = metadata(TxnState.ONGOING)
    _, sink_value = record_of(sink)
    _, kafka_value = record_of(kafka)
    assert sink_value is not None and kafka_value is not None
    assert struct.unpack(">h", sink_value[:2]) == (SINK_VALUE_VERSION,)
    assert struct.unpack(">h", kafka_value[:2]) == (0,)
    committed_only = metadata(TxnState.COMPLETE_COMMIT, committed_micro_batch=7)
    _, committed_value = record_of(committed_only)
    assert committed_value is not None
    assert struct.unpack(">h", committed_value[:2]) == (SINK_VALUE_VERSION,)

    stored = StoredTransactions()
    stored.replay([record_of(kafka), record_of(sink), record_of(committed_only)])
    assert stored.skipped == 0
    assert stored.entries["q"].metadata == committed_only
    stored.replay([record_of(sink)])
    assert stored.entries["q"].metadata == sink
