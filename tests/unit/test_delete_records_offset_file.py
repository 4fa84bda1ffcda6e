"""The offset JSON file of `replog topics delete-records`: Kafka's layout read, every
mistake refused with a ConfigError that says where and what."""

from __future__ import annotations

import json

import pytest

from spark_replica.errors import ConfigError, InvalidTopicError
from spark_replica.tools.cli.delete_records import parse_offset_file
from spark_replica.topics import TopicPartition


def test_kafkas_layout_is_read() -> None:
    text = json.dumps(
        {
            "partitions": [
                {"topic": "t", "partition": 0, "offset": 10},
                {"topic": "t", "partition": 1, "offset": -1},
                {"topic": "u", "partition": 0, "offset": 0},
            ],
            "version": 1,
        }
    )
    assert parse_offset_file(text, "f.json") == {
        TopicPartition("t", 0): 10,
        TopicPartition("t", 1): -1,
        TopicPartition("u", 0): 0,
    }


def test_the_version_may_be_left_out() -> None:
    text = '{"partitions": [{"topic": "t", "partition": 0, "offset": 1}]}'
    assert parse_offset_file(text, "f.json") == {TopicPartition("t", 0): 1}


def entry(**fields: object) -> str:
    return json.dumps({"partitions": [fields], "version": 1})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", r"f\.json: not JSON"),
        ("[]", r"expected \{\"partitions\""),
        ('{"partitions": {}}', r"expected \{\"partitions\""),
        ('{"partitions": [], "version": 2}', "unsupported version 2"),
        ('{"partitions": [], "version": 1}', "lists no partitions"),
        (entry(topic="t", partition=0), r"partitions\[0\]: expected"),
        (entry(topic="t", partition=0, offset=1, extra=1), r"partitions\[0\]: expected"),
        (entry(topic=1, partition=0, offset=1), "topic must be a string"),
        (entry(topic="t", partition=-1, offset=1), "non-negative integer, not -1"),
        (entry(topic="t", partition=True, offset=1), "partition must be"),
        (entry(topic="t", partition=0, offset=-2), "or -1 .the high watermark., not -2"),
        (entry(topic="t", partition=0, offset="5"), "offset must be"),
        (entry(topic="t", partition=0, offset=1.5), "offset must be"),
    ],
)
def test_mistakes_are_config_errors_naming_the_place(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_offset_file(text, "f.json")


def test_a_partition_listed_twice_is_refused() -> None:
    twice = {"topic": "t", "partition": 0, "offset": 1}
    text = json.dumps({"partitions": [twice, twice], "version": 1})
    with pytest.raises(ConfigError, match=r"partitions\[1\]: t-0 is listed twice"):
        parse_offset_file(text, "f.json")


def test_an_invalid_topic_name_is_refused() -> None:
    with pytest.raises(InvalidTopicError):
        parse_offset_file(entry(topic="a b", partition=0, offset=1), "f.json")
