"""`replog transactions describe --json`'s document, reckoned from DescribeTransactions'
answer, and `describe-producers --json`'s from DescribeProducers' (the commands
themselves run against real brokers in the integration tests)."""

from __future__ import annotations

from spark_replica.client.kafka_admin import ProducerDescription, TransactionDescription
from spark_replica.tools.cli.transactions import (
    NO_START_TIME,
    PRODUCERS_COLUMNS,
    description_json,
    producer_json,
)
from spark_replica.topics import TopicPartition


def test_an_open_transaction_has_a_start_and_a_duration() -> None:
    described = TransactionDescription(
        "tx", 2, "Ongoing", 7, 3, 60_000, 1_000, [TopicPartition("t", 0), TopicPartition("t", 4)]
    )
    assert description_json(described, now_ms=4_500) == {
        "transactional_id": "tx",
        "coordinator": 2,
        "producer_id": 7,
        "producer_epoch": 3,
        "state": "Ongoing",
        "timeout_ms": 60_000,
        "start_time_ms": 1_000,
        "duration_ms": 3_500,
        "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 4}],
    }


def test_a_transactional_id_without_a_transaction_has_neither() -> None:
    described = TransactionDescription("tx", 1, "Empty", 7, 0, 60_000, NO_START_TIME)
    document = description_json(described, now_ms=4_500)
    assert (document["start_time_ms"], document["duration_ms"], document["partitions"]) == (
        None,
        None,
        [],
    )


def test_a_producer_without_an_open_transaction_has_no_start_offset() -> None:
    open_one = producer_json(ProducerDescription(7, 2, 9, 1_000, 3, 40))
    assert open_one == {
        "producer_id": 7,
        "producer_epoch": 2,
        "latest_coordinator_epoch": 3,
        "last_sequence": 9,
        "last_timestamp": 1_000,
        "current_transaction_start_offset": 40,
    }
    assert len(open_one) == len(PRODUCERS_COLUMNS)  # a table row is the document's values
    idle = producer_json(ProducerDescription(8, 0, 4, 1_000, -1, -1))
    assert (idle["latest_coordinator_epoch"], idle["current_transaction_start_offset"]) == (
        -1,
        None,
    )
