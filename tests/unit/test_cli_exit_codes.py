"""The CLI's pure rules: exit codes, Kafka's console producer properties, counts, and
telling the two listeners apart by the APIs they serve."""

from __future__ import annotations

import pytest

from spark_replica.client.listener_probe import KAFKA, REPLOG, UNKNOWN, protocol_of
from spark_replica.errors import (
    ConfigError,
    InvalidConfigError,
    InvalidReplicationFactorError,
    NotEnoughReplicasError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from spark_replica.tools.cli.exit_codes import BAD_INPUT, FAILED, exit_code_of
from spark_replica.tools.cli.output import plural
from spark_replica.tools.cli.record_format import LineFormat, parse_producer_properties
from spark_replica.wire.native.apis import SUPPORTED_VERSIONS


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("bad flag"), BAD_INPUT),
        (InvalidConfigError("retention.ms='abc'"), BAD_INPUT),
        (InvalidReplicationFactorError("rf 0"), BAD_INPUT),
        (UnknownTopicOrPartitionError("no such topic"), FAILED),
        (TopicAlreadyExistsError("t exists"), FAILED),
        (NotEnoughReplicasError("min isr"), FAILED),
    ],
)
def test_bad_input_exits_2_and_a_failed_operation_1(error: Exception, code: int) -> None:
    assert exit_code_of(error) == code  # type: ignore[arg-type]


def test_producer_properties_follow_kafka_console_producer() -> None:
    assert parse_producer_properties([], LineFormat()) == LineFormat()
    keyed = parse_producer_properties(["parse.key=true"], LineFormat())
    assert keyed.parse(b"k\tv", 1).key == b"k"
    colon = parse_producer_properties(["parse.key=true", "key.separator=:"], LineFormat())
    assert colon.parse(b"k:v", 1).value == b"v"
    # key.separator alone splits nothing, as in Kafka
    assert parse_producer_properties(["key.separator=:"], LineFormat()).key_separator is None
    headed = parse_producer_properties(["parse.headers=true"], LineFormat()).parse(b"h:1\tv", 1)
    assert headed.headers == [("h", b"1")]
    with pytest.raises(ConfigError, match="not known"):
        parse_producer_properties(["print.key=true"], LineFormat())
    with pytest.raises(ConfigError, match="true or false"):
        parse_producer_properties(["parse.key=yes"], LineFormat())


def test_counts_read_as_english() -> None:
    assert (plural(1, "record"), plural(0, "record"), plural(2, "line")) == (
        "1 record",
        "0 records",
        "2 lines",
    )


def test_a_listener_is_known_by_the_apis_it_serves() -> None:
    replog_keys = {int(key) for key in SUPPORTED_VERSIONS}
    kafka_keys = {0, 1, 2, 3, 8, 9, 10, 11, 12, 18, 19}
    assert protocol_of(replog_keys) == REPLOG
    assert protocol_of(kafka_keys) == KAFKA
    assert protocol_of(set()) == UNKNOWN
    assert protocol_of(replog_keys | kafka_keys) == UNKNOWN
