"""The transaction APIs' tables: their keys and versions, and golden bytes laid out by
hand from Kafka's message definitions, one per shape the tables compose (round trips and
malformed input: test_kafka_wire_messages.py, which covers every served table), and
hostile counts refused before anything is sized from them."""

from __future__ import annotations

import tracemalloc

import pytest

from spark_replica.errors import ProtocolError
from spark_replica.wire.kafka.messages import transactions
from spark_replica.wire.schema import Data, Message

# Far below what sizing a list from a hostile count would take.
ALLOCATION_CEILING = 1 << 20


def test_each_api_has_its_kafka_key_and_versions() -> None:
    served = {m.api_key: (m.name, m.versions, m.flexible) for m in transactions.REQUESTS}
    assert served == {
        24: ("AddPartitionsToTxnRequest", (0, 3), 3),
        25: ("AddOffsetsToTxnRequest", (0, 3), 3),
        26: ("EndTxnRequest", (0, 3), 3),
        27: ("WriteTxnMarkersRequest", (0, 1), 1),
        28: ("TxnOffsetCommitRequest", (0, 3), 3),
        65: ("DescribeTransactionsRequest", (0, 0), 0),
        66: ("ListTransactionsRequest", (0, 1), 0),
        61: ("DescribeProducersRequest", (0, 0), 0),
    }
    for request, response in zip(transactions.REQUESTS, transactions.RESPONSES, strict=True):
        assert (request.api_key, request.versions) == (response.api_key, response.versions)


def test_golden_add_partitions_to_txn_v0_request() -> None:
    body = bytes.fromhex(
        "0002" "7478"  # transactional id "tx"
        "0000000000000007" "0001"  # producer id 7, epoch 1
        "00000001" "0001" "74" "00000002" "00000000" "00000003"  # topic "t": [0, 3]
    )  # fmt: skip
    decoded = transactions.ADD_PARTITIONS_TO_TXN_REQUEST.from_bytes(0, body)
    assert decoded.v3_and_below_transactional_id == "tx"
    assert (decoded.v3_and_below_producer_id, decoded.v3_and_below_producer_epoch) == (7, 1)
    assert [(t.name, t.partitions) for t in decoded.v3_and_below_topics] == [("t", [0, 3])]
    assert transactions.ADD_PARTITIONS_TO_TXN_REQUEST.to_bytes(0, decoded) == body


def test_golden_end_txn_v3_request() -> None:
    body = bytes.fromhex(
        "03" "7478"  # compact string "tx"
        "0000000000000007" "0002" "01"  # producer id 7, epoch 2, committed
        "00"  # tagged fields
    )  # fmt: skip
    decoded = transactions.END_TXN_REQUEST.from_bytes(3, body)
    assert (decoded.transactional_id, decoded.producer_id, decoded.producer_epoch) == ("tx", 7, 2)
    assert decoded.committed is True
    assert transactions.END_TXN_REQUEST.to_bytes(3, decoded) == body


def test_golden_write_txn_markers_v1_request() -> None:
    marker = Data(
        producer_id=7,
        producer_epoch=2,
        transaction_result=False,
        topics=[Data(name="t", partition_indexes=[1])],
        coordinator_epoch=4,
    )
    expected = bytes.fromhex(
        "02"  # one marker
        "0000000000000007" "0002" "00"  # producer id 7, epoch 2, ABORT
        "02" "0274" "02" "00000001" "00"  # topic "t": [1], tags
        "00000004" "00"  # coordinator epoch 4, marker's tags
        "00"  # request's tags
    )  # fmt: skip
    request = Data(markers=[marker])
    assert transactions.WRITE_TXN_MARKERS_REQUEST.to_bytes(1, request) == expected


def test_golden_list_transactions_v0_response() -> None:
    response = Data(
        throttle_time_ms=0,
        error_code=0,
        unknown_state_filters=["bogus"],
        transaction_states=[
            Data(transactional_id="tx", producer_id=7, transaction_state="Ongoing")
        ],
    )
    expected = bytes.fromhex(
        "00000000" "0000"  # throttle, error
        "02" "06" "626f677573"  # unknown state filters: ["bogus"]
        "02" "03" "7478" "0000000000000007" "08" "4f6e676f696e67" "00"  # one state, tags
        "00"  # tags
    )  # fmt: skip
    assert transactions.LIST_TRANSACTIONS_RESPONSE.to_bytes(0, response) == expected


def test_golden_describe_transactions_v0_response() -> None:
    """The producer epoch is an int16, as everywhere else in Kafka's protocol."""
    response = Data(
        throttle_time_ms=0,
        transaction_states=[
            Data(
                error_code=0,
                transactional_id="tx",
                transaction_state="Ongoing",
                transaction_timeout_ms=60_000,
                transaction_start_time_ms=5,
                producer_id=7,
                producer_epoch=2,
                topic_partitions=[Data(name="t", partition_indexes=[0, 3])],
            )
        ],
    )
    expected = bytes.fromhex(
        "00000000"  # throttle
        "02" "0000" "03" "7478" "08" "4f6e676f696e67"  # one state: error, "tx", "Ongoing"
        "0000ea60" "0000000000000005"  # timeout 60000 ms, start time 5
        "0000000000000007" "0002"  # producer id 7, epoch 2
        "02" "0274" "03" "00000000" "00000003" "00"  # topic "t": [0, 3], tags
        "00"  # the state's tags
        "00"  # tags
    )  # fmt: skip
    assert transactions.DESCRIBE_TRANSACTIONS_RESPONSE.to_bytes(0, response) == expected
    assert transactions.DESCRIBE_TRANSACTIONS_RESPONSE.from_bytes(0, expected) == response


def test_golden_describe_producers_v0() -> None:
    """The producer epoch is an int32 here, unlike everywhere else in Kafka's protocol."""
    request = bytes.fromhex(
        "02" "0274" "03" "00000000" "00000003" "00"  # topic "t": [0, 3], tags
        "00"  # tags
    )  # fmt: skip
    decoded = transactions.DESCRIBE_PRODUCERS_REQUEST.from_bytes(0, request)
    assert [(t.name, t.partition_indexes) for t in decoded.topics] == [("t", [0, 3])]
    response = Data(
        throttle_time_ms=0,
        topics=[
            Data(
                name="t",
                partitions=[
                    Data(
                        partition_index=0,
                        error_code=0,
                        error_message=None,
                        active_producers=[
                            Data(
                                producer_id=7,
                                producer_epoch=2,
                                last_sequence=9,
                                last_timestamp=5,
                                coordinator_epoch=-1,
                                current_txn_start_offset=40,
                            )
                        ],
                    ),
                    Data(
                        partition_index=3,
                        error_code=6,
                        error_message="x",
                        active_producers=[],
                    ),
                ],
            )
        ],
    )
    expected = bytes.fromhex(
        "00000000"  # throttle
        "02" "0274" "03"  # one topic "t", two partitions
        "00000000" "0000" "00"  # partition 0, no error, null message
        "02" "0000000000000007" "00000002" "00000009"  # producer 7, epoch 2, last seq 9
        "0000000000000005" "ffffffff" "0000000000000028" "00"  # time 5, coord -1, start 40
        "00"  # the partition's tags
        "00000003" "0006" "0278" "01" "00"  # partition 3: NOT_LEADER_OR_FOLLOWER, "x"
        "00"  # the topic's tags
        "00"  # tags
    )  # fmt: skip
    assert transactions.DESCRIBE_PRODUCERS_RESPONSE.to_bytes(0, response) == expected
    assert transactions.DESCRIBE_PRODUCERS_RESPONSE.from_bytes(0, expected) == response


# A compact array's length is the varint of its count + 1: here 2**32 - 1, whose count
# no frame can hold.
HUGE_COMPACT_COUNT = b"\xff\xff\xff\xff\x0f"
HOSTILE_DESCRIBE_PRODUCERS = [
    ("topics", transactions.DESCRIBE_PRODUCERS_REQUEST, b""),
    ("partition indexes", transactions.DESCRIBE_PRODUCERS_REQUEST, bytes.fromhex("02" "0274")),
    (
        "active producers",
        transactions.DESCRIBE_PRODUCERS_RESPONSE,
        bytes.fromhex("00000000" "02" "0274" "02" "00000000" "0000" "00"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("message", "prefix"),
    [case[1:] for case in HOSTILE_DESCRIBE_PRODUCERS],
    ids=[case[0] for case in HOSTILE_DESCRIBE_PRODUCERS],
)
def test_describe_producers_hostile_counts_are_refused_before_allocating(
    message: Message, prefix: bytes
) -> None:
    """Each array of DescribeProducers, claiming more entries than the frame holds, is
    refused by the codec's bounds before a list is sized from the count."""
    data = prefix + HUGE_COMPACT_COUNT + bytes(16)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="count"):
            message.from_bytes(0, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ALLOCATION_CEILING
