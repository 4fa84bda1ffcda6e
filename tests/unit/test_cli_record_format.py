"""How `replog produce` reads lines and `replog consume` prints records: plain values."""

from __future__ import annotations

import base64
import json

import pytest

from spark_replica.client import LOG_APPEND_TIME, ConsumerRecord
from spark_replica.client.fetched import CREATE_TIME
from spark_replica.errors import ConfigError
from spark_replica.tools.cli.record_format import (
    LineFormat,
    ParsedLine,
    TextFormat,
    format_json,
    parse_offset,
    parse_properties,
)

HEADERS = LineFormat(key_separator=b"\t", headers_delimiter=b"\t")


def record(**changes: object) -> ConsumerRecord:
    fields: dict[str, object] = {
        "topic": "t",
        "partition": 2,
        "offset": 42,
        "timestamp_ms": 1_700_000_000_000,
        "key": b"k",
        "value": b"v",
        "headers": (("h1", b"a"), ("h2", None)),
    }
    fields.update(changes)
    return ConsumerRecord(**fields)  # type: ignore[arg-type]


def test_a_plain_line_is_the_value() -> None:
    assert LineFormat().parse(b"a:b\tc", 1) == ParsedLine(None, b"a:b\tc", None)


def test_key_splits_at_the_first_separator() -> None:
    assert LineFormat(key_separator=b":").parse(b"k:v:w", 1) == ParsedLine(b"k", b"v:w", None)
    with pytest.raises(ConfigError, match="line 7 has no key separator ':'"):
        LineFormat(key_separator=b":").parse(b"novalue", 7)


def test_headers_key_and_value_as_kafkas_console_producer_reads_them() -> None:
    parsed = HEADERS.parse(b"h1:a,h2:b:c,h3:\tkey\tvalue", 1)
    assert parsed == ParsedLine(b"key", b"value", [("h1", b"a"), ("h2", b"b:c"), ("h3", b"")])


def test_an_empty_headers_part_is_no_headers() -> None:
    assert HEADERS.parse(b"\tkey\tvalue", 1) == ParsedLine(b"key", b"value", None)
    without_key = LineFormat(headers_delimiter=b"|")
    assert without_key.parse(b"a:1|x\ty", 1) == ParsedLine(None, b"x\ty", [("a", b"1")])


def test_lines_that_do_not_fit_name_their_number() -> None:
    with pytest.raises(ConfigError, match="line 3 has no headers delimiter"):
        HEADERS.parse(b"h1:a", 3)
    with pytest.raises(ConfigError, match="line 4: header 'h1=a' has no header key separator"):
        HEADERS.parse(b"h1=a\tk\tv", 4)
    with pytest.raises(ConfigError, match="line 5: a header name is not UTF-8"):
        HEADERS.parse(b"\xff:a\tk\tv", 5)


def test_separators_that_clash_or_are_empty_are_refused() -> None:
    with pytest.raises(ConfigError, match="--headers-delimiter and --header-separator"):
        LineFormat(headers_delimiter=b",")
    with pytest.raises(ConfigError, match="--header-separator and --header-key-separator"):
        LineFormat(headers_delimiter=b"\t", header_separator=b":")
    with pytest.raises(ConfigError, match="--key-separator must not be empty"):
        LineFormat(key_separator=b"")
    with pytest.raises(ConfigError, match="--header-separator must not be empty"):
        LineFormat(headers_delimiter=b"\t", header_separator=b"")
    # Headers are cut off first, so the key may use the header key separator.
    assert LineFormat(key_separator=b":", headers_delimiter=b"\t").parse(b"a:1\tk:v", 1) == (
        ParsedLine(b"k", b"v", [("a", b"1")])
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("17", 17), (" 5 ", 5), ("earliest", "earliest"), ("LATEST", "latest")],
)
def test_offsets(text: str, expected: int | str) -> None:
    assert parse_offset(text) == expected


@pytest.mark.parametrize("text", ["-1", "first", "", "1.5", "0x10"])
def test_bad_offsets_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="non-negative offset, earliest or latest"):
        parse_offset(text)


def test_text_prints_the_value_by_default() -> None:
    assert TextFormat().format(record(), CREATE_TIME) == b"v\n"
    assert TextFormat().format(record(value=None), CREATE_TIME) == b"null\n"


def test_text_prints_fields_in_kafkas_order() -> None:
    every = parse_properties(
        [
            "print.timestamp=true",
            "print.partition=true",
            "print.offset=true",
            "print.headers=true",
            "print.key=true",
        ]
    )
    assert every.format(record(), CREATE_TIME) == (
        b"CreateTime:1700000000000\tPartition:2\tOffset:42\th1:a,h2:null\tk\tv\n"
    )
    assert every.format(record(headers=(), key=None), LOG_APPEND_TIME) == (
        b"LogAppendTime:1700000000000\tPartition:2\tOffset:42\tNO_HEADERS\tnull\tv\n"
    )


def test_separators_and_literals_are_properties() -> None:
    custom = parse_properties(
        [
            "print.offset=TRUE",
            "print.headers=true",
            "print.value=false",
            "key.separator= | ",
            "headers.separator=;",
            "line.separator=\r\n",
            "null.literal=<none>",
        ]
    )
    assert custom.format(record(), CREATE_TIME) == b"Offset:42 | h1:a;h2:<none>\r\n"


def test_properties_apply_over_a_base() -> None:
    base = TextFormat(print_key=True, key_separator=b":")
    assert parse_properties([], base) == base
    assert parse_properties(["print.key=false"], base).format(record(), CREATE_TIME) == b"v\n"


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("print.offsets=true", "'print.offsets' is not known; use one of"),
        ("key.deserializer=x", "'key.deserializer' is not known"),
        ("print.offset", "use name=value"),
        ("print.offset=yes", "print.offset='yes': use true or false"),
        ("print.key=", "use true or false"),
    ],
)
def test_bad_properties_are_refused(assignment: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_properties([assignment])


def test_json_has_every_field_and_text_as_strings() -> None:
    line = format_json(record(), CREATE_TIME)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "topic": "t",
        "partition": 2,
        "offset": 42,
        "timestamp": 1_700_000_000_000,
        "timestamp_type": "CreateTime",
        "key": "k",
        "value": "v",
        "headers": [{"key": "h1", "value": "a"}, {"key": "h2", "value": None}],
    }


def test_json_marks_bytes_that_are_not_utf8_as_base64() -> None:
    binary = b"\x00\xff\xfe"
    document = json.loads(
        format_json(record(key=None, value=binary, headers=(("b", binary),)), LOG_APPEND_TIME)
    )
    assert document["key"] is None
    assert document["value"] == {"base64": base64.b64encode(binary).decode()}
    assert document["headers"] == [{"key": "b", "value": {"base64": "AP/+"}}]
    assert document["timestamp_type"] == "LogAppendTime"
    assert json.loads(format_json(record(value="é\n".encode()), CREATE_TIME))["value"] == "é\n"
