"""The record browser's rules from plain values: queries checked with a message naming
what is wrong, fields shown as text or hex and cut at their cap, pages cut at the byte
cap but never empty."""

from __future__ import annotations

import pytest

from spark_replica.client import ConsumerRecord
from spark_replica.tools.console.record_view import (
    MAX_FIELD_BYTES,
    MAX_PAGE_BYTES,
    RecordQuery,
    RecordQueryError,
    page_of,
    parse_query,
    parse_timestamp,
    record_json,
    shown_bytes,
)


def record(offset: int, value: bytes | None = b"v", key: bytes | None = None) -> ConsumerRecord:
    return ConsumerRecord("t", 0, offset, 1_000 + offset, key, value, (("h", b"\x01"),))


def test_a_query_from_an_offset_with_defaults() -> None:
    assert parse_query({"topic": " t ", "partition": "2", "offset": "5"}) == RecordQuery(
        "t", 2, 5, None, 20, "text"
    )


def test_a_query_from_a_time_in_ms_or_iso_8601() -> None:
    query = parse_query({"topic": "t", "partition": "0", "timestamp": "1700000000000"})
    assert (query.offset, query.timestamp_ms) == (None, 1_700_000_000_000)
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({}, "name a topic"),
        ({"topic": "t"}, "name a partition"),
        ({"topic": "t", "partition": "-1", "offset": "0"}, "partition must be 0 or more"),
        ({"topic": "t", "partition": "0"}, "say where to start"),
        ({"topic": "t", "partition": "0", "offset": "1.5"}, "offset must be a whole number"),
        ({"topic": "t", "partition": "0", "offset": "1", "timestamp": "2"}, "not both"),
        ({"topic": "t", "partition": "0", "timestamp": "soon"}, "ISO 8601"),
        ({"topic": "t", "partition": "0", "offset": "0", "limit": "0"}, "limit must be 1"),
        ({"topic": "t", "partition": "0", "offset": "0", "limit": "101"}, "at most 100"),
        ({"topic": "t", "partition": "0", "offset": "0", "format": "b64"}, "text or hex"),
    ],
)
def test_bad_queries_say_what_is_wrong(params: dict[str, str], says: str) -> None:
    with pytest.raises(RecordQueryError, match=says):
        parse_query(params)


def test_fields_as_text_or_hex_cut_at_their_cap() -> None:
    assert shown_bytes(None, "text") is None
    assert shown_bytes(b"\x00\xff", "hex") == {"data": "00ff", "size": 2, "truncated": False}
    assert shown_bytes(b"a\xffb", "text") == {"data": "a\ufffdb", "size": 3, "truncated": False}
    big = shown_bytes(b"x" * (MAX_FIELD_BYTES + 10), "text")
    assert big == {"data": "x" * MAX_FIELD_BYTES, "size": MAX_FIELD_BYTES + 10, "truncated": True}


def test_a_record_with_its_headers() -> None:
    shown = record_json(record(3, key=b"k"), "hex")
    assert shown == {
        "offset": 3,
        "timestamp_ms": 1_003,
        "key": {"data": "6b", "size": 1, "truncated": False},
        "value": {"data": "76", "size": 1, "truncated": False},
        "headers": [{"key": "h", "value": {"data": "01", "size": 1, "truncated": False}}],
    }


def test_a_page_stops_at_the_limit_or_the_byte_cap_but_is_never_empty() -> None:
    small = [record(i) for i in range(10)]
    assert page_of(small, 4) == (small[:4], False)
    half = b"x" * (MAX_PAGE_BYTES // 2)
    large = [record(i, half) for i in range(3)]
    assert page_of(large, 10) == (large[:1], True)
    huge = [record(0, b"x" * (MAX_PAGE_BYTES * 2))]
    assert page_of(huge, 10) == (huge, False)
