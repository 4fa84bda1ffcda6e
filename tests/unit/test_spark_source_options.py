"""Source options: Kafka's names, defaults and meanings, and errors that name the option."""

from __future__ import annotations

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from connectors.spark.offsets import OffsetRange
from connectors.spark.partition_reader import RangePartition, range_partitions
from connectors.spark.schema import source_schema
from connectors.spark.source_options import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    DEFAULT_POLL_TIMEOUT_MS,
    check_schema,
    include_headers,
    parse_duration_ms,
    parse_source_options,
)
from spark_replica.client import IsolationLevel
from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition as TP


def parse(streaming: bool = True, **options: str) -> object:
    # Spark hands options over lower-cased; parse them as Spark would give them.
    return parse_source_options(
        {key.lower(): value for key, value in options.items()}, streaming=streaming
    )


def test_defaults_are_kafkas() -> None:
    stream = parse_source_options({"subscribe": "a, b,a"}, streaming=True)
    assert stream.subscription.topics == ("a", "b")
    assert stream.starting.kind == "latest"
    assert stream.fail_on_data_loss is True
    assert stream.include_headers is False
    assert stream.max_offsets_per_trigger is None
    assert stream.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS
    assert stream.poll_timeout_ms == DEFAULT_POLL_TIMEOUT_MS
    batch = parse_source_options({"subscribe": "a"}, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")


def test_every_option_is_parsed() -> None:
    source = parse_source_options(
        {
            "assign": '{"a": [1, 0], "b": [0]}',
            "startingoffsetsbytimestamp": '{"a": {"0": 1000}}',
            "startingoffsetsbytimestampstrategy": "LATEST",
            "endingoffsets": '{"a": {"1": 30, "0": -1}}',
            "maxoffsetspertrigger": "100",
            "minoffsetspertrigger": "10",
            "maxtriggerdelay": "30s",
            "minpartitions": "8",
            "failondataloss": "False",
            "includeheaders": "true",
            "kafkaconsumer.polltimeoutms": "5000",
        },
        streaming=False,
    )
    assert source.subscription.partitions == (TP("a", 0), TP("a", 1), TP("b", 0))
    assert source.starting.kind == "timestamps"
    assert source.starting.offsets == {TP("a", 0): 1000}
    assert source.timestamp_strategy == "latest"
    assert source.ending.offsets == {TP("a", 1): 30, TP("a", 0): -1}
    assert (source.max_offsets_per_trigger, source.min_offsets_per_trigger) == (100, 10)
    assert source.max_trigger_delay_ms == 30_000
    assert source.min_partitions == 8
    assert source.fail_on_data_loss is False
    assert source.include_headers is True
    assert source.poll_timeout_ms == 5000


def test_timestamp_options_take_precedence_as_in_kafka() -> None:
    source = parse(
        streaming=False,
        subscribe="a",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"a": {"0": 5}}',
        startingTimestamp="1000",
        endingOffsets="latest",
        endingTimestamp="2000",
    )
    assert (source.starting.kind, source.starting.timestamp) == ("timestamp", 1000)
    assert (source.ending.kind, source.ending.timestamp) == ("timestamp", 2000)


def test_subscribe_pattern_matches_whole_names() -> None:
    source = parse(subscribePattern="ev.*")
    assert source.subscription.wants("events")
    assert not source.subscription.wants("my-events")
    assert source.subscription.topic_names() is None


def test_a_pattern_leaves_the_brokers_own_topics_out_but_they_can_be_named() -> None:
    assert not parse(subscribePattern=".*").subscription.wants("__consumer_offsets")
    assert parse(subscribePattern=".*").subscription.wants("__other")
    assert parse(subscribe="__consumer_offsets").subscription.wants("__consumer_offsets")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of assign, subscribe"),
        ({"subscribe": "a", "subscribePattern": "a.*"}, "subscribe and subscribePattern"),
        ({}, "exactly one of assign, subscribe or subscribePattern"),
        ({"subscribe": " , "}, "subscribe"),
        ({"subscribePattern": "(["}, "subscribePattern"),
        ({"assign": "[0, 1]"}, "assign"),
        ({"assign": '{"a": ["x"]}'}, "assign"),
        ({"subscribe": "a", "startingOffsets": "newest"}, "startingOffsets='newest'"),
        ({"subscribe": "a", "startingOffsets": '{"b": {"0": 1}}'}, "startingOffsets names"),
        ({"assign": '{"a": [0]}', "startingOffsets": '{"a": {"1": 1}}'}, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "latest"}, "endingOffsets is for batch"),
        ({"subscribe": "a", "endingTimestamp": "5"}, "endingTimestamp is for batch"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger='0'"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "ten"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "minOffsetsPerTrigger": "-1"}, "minOffsetsPerTrigger"),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"},
            "minOffsetsPerTrigger=20 is above maxOffsetsPerTrigger=10",
        ),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({"subscribe": "a", "includeHeaders": "1"}, "includeHeaders"),
        ({"subscribe": "a", "startingTimestamp": "-5"}, "startingTimestamp"),
        ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -1}}'}, "ByTimestamp"),
        ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "skip"}, "Strategy"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"subscribe": "a", "kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
    ],
)
def test_bad_stream_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace("[", r"\[")):
        parse(streaming=True, **options)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"startingOffsets": "latest"}, "startingOffsets: latest"),
        ({"startingOffsets": '{"a": {"0": -1}}'}, "startingOffsets: latest"),
        ({"endingOffsets": "earliest"}, "endingOffsets: earliest"),
        ({"endingOffsets": '{"a": {"0": -2}}'}, "endingOffsets: earliest"),
        ({"endingOffsets": "{}x"}, "endingOffsets"),
    ],
)
def test_bad_batch_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse(streaming=False, subscribe="a", **options)


@pytest.mark.parametrize(
    ("text", "ms"), [("15m", 900_000), ("30s", 30_000), ("250", 250), ("2h", 7_200_000)]
)
def test_durations_read_as_spark_writes_them(text: str, ms: int) -> None:
    assert parse_duration_ms(text, "maxTriggerDelay") == ms


def test_the_isolation_level_is_kafkas_and_reaches_the_tasks() -> None:
    assert parse(subscribe="a").isolation_level is IsolationLevel.READ_UNCOMMITTED  # type: ignore[attr-defined]
    committed = parse_source_options(
        {"subscribe": "a", "kafka.isolation.level": "READ_COMMITTED"}, streaming=False
    )
    assert committed.isolation_level is IsolationLevel.READ_COMMITTED
    (task,) = range_partitions([OffsetRange(TP("a", 0), 0, 10)], "h:1", committed)
    assert isinstance(task, RangePartition) and task.isolation_level == "read_committed"


def test_include_headers_decides_the_schema() -> None:
    assert include_headers({"includeheaders": "TRUE"}) is True
    assert include_headers({}) is False
    check_schema(source_schema(True), True)
    check_schema(source_schema(False), False)
    with pytest.raises(ConfigError, match="includeHeaders=true"):
        check_schema(source_schema(True), False)


def test_a_user_schema_is_refused() -> None:
    user = StructType([StructField("value", StringType())])
    with pytest.raises(ConfigError, match="user-specified schema"):
        check_schema(user, False)


SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
    'password="pw";'
)


def test_security_options_under_either_prefix_are_carried_to_the_tasks() -> None:
    parsed = parse_source_options(
        {
            "subscribe": "a",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "replog.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": SCRAM_JAAS,
        },
        streaming=True,
    )
    assert (parsed.security.protocol, parsed.security.sasl_mechanism) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
    )
    assert (parsed.security.username, parsed.security.password) == ("alice", "pw")
    assert parse(subscribe="a").security.protocol == "PLAINTEXT"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS"},
            r"kafka\.ssl\.truststore\.type=JKS: only PEM is supported",
        ),
        ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"}, "GSSAPI"),
        ({"kafka.sasl.jaas.config": SCRAM_JAAS}, r"security\.protocol=PLAINTEXT does not use"),
        ({"replog.ssl.keystore.password": "x"}, "encrypted keys are not supported"),
    ],
)
def test_unsupported_security_options_fail_by_name(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_source_options({"subscribe": "a", **options}, streaming=False)
