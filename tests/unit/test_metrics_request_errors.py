"""Errors per API and error code: the walk that finds a response's error codes in
either dialect's layout, Kafka's error names, and the counter family they feed."""

from __future__ import annotations

import enum

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from brokerd.metrics import BrokerMetrics
from brokerd.metrics.error_names import KAFKA_ERROR_NAMES, UNKNOWN_SERVER_ERROR, error_name
from brokerd.serving.response_errors import error_codes
from spark_replica.errors import (
    NotLeaderOrFollowerError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from spark_replica.wire.native.produce import (
    ProducePartitionResult,
    ProduceResponse,
    ProduceTopicResult,
)
from spark_replica.wire.schema import Data

PRODUCE, METADATA = 0, 3
ERRORS_FAMILY = "kafka_network_requestmetrics_errors"


class Code(enum.IntEnum):
    NOT_COORDINATOR = 16


def test_error_codes_of_a_native_response_per_partition() -> None:
    response = ProduceResponse(
        [
            ProduceTopicResult(
                "t",
                [
                    ProducePartitionResult(0, 0, None, 10, 0),
                    ProducePartitionResult(1, NotLeaderOrFollowerError.code, "moved"),
                ],
            ),
            ProduceTopicResult("u", [ProducePartitionResult(0, UnknownTopicOrPartitionError.code)]),
        ]
    )
    assert sorted(error_codes(response)) == [3, 6]


def test_error_codes_of_a_kafka_response_top_level_and_nested() -> None:
    response = Data(
        throttle_time_ms=0,
        error_code=UnknownServerError.code,
        brokers=[Data(node_id=1, host="h", port=1)],
        topics=[
            Data(
                error_code=0,
                name="t",
                partitions=[
                    Data(error_code=6, partition_index=0, replica_nodes=[1, 2, 3]),
                    Data(error_code=0, partition_index=1, replica_nodes=[2, 3, 1]),
                ],
            )
        ],
        records=[memoryview(b"abc")],
    )
    assert sorted(error_codes(response)) == [-1, 6]
    assert error_codes(Data(error_code=0, topics=[])) == []
    assert error_codes(Data(error_code=Code.NOT_COORDINATOR, groups=None)) == [16]


def test_every_error_code_replog_answers_has_its_kafka_name() -> None:
    for code in range(-1, 100):
        if code and not isinstance(error_for_code(code), UnknownServerError):
            assert code in KAFKA_ERROR_NAMES, code
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(17) == "INVALID_TOPIC_EXCEPTION"
    assert error_name(45) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert error_name(12345) == UNKNOWN_SERVER_ERROR


def test_errors_are_served_per_request_and_error_name() -> None:
    metrics = BrokerMetrics()
    errors = metrics.request_errors
    errors.count(PRODUCE, 6)
    errors.count(PRODUCE, 6)
    errors.count(METADATA, 3)
    errors.count(9999, 12345)  # neither key nor code grows the label set
    text = generate_latest(metrics.registry).decode()
    samples = {
        (s.labels["request"], s.labels["error"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == f"{ERRORS_FAMILY}_total"
    }
    assert samples == {
        ("Produce", "NOT_LEADER_OR_FOLLOWER"): 2.0,
        ("Metadata", "UNKNOWN_TOPIC_OR_PARTITION"): 1.0,
        ("Unknown", UNKNOWN_SERVER_ERROR): 1.0,
    }
