"""The record browser's rules, from plain values: what a query asks, and how a record is
shown (no I/O here).

A query names a topic and a partition and where to start: an offset, or a timestamp
(milliseconds since the epoch, or ISO 8601; without a zone, UTC) whose first record at
or after it starts the page, as Kafka's offsets-for-times lookup does. A page holds at
most MAX_RECORDS records (`limit`, default DEFAULT_RECORDS) and stops adding records
once it holds MAX_PAGE_BYTES; each key, value and header value shows at most
MAX_FIELD_BYTES, as UTF-8 text (bytes that are not UTF-8 shown as U+FFFD) or as hex.
Bad input is a RecordQueryError, answered with 400 and its message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from spark_replica.client import ConsumerRecord
from spark_replica.errors import ConfigError

DEFAULT_RECORDS = 20
MAX_RECORDS = 100
MAX_FIELD_BYTES = 4096
MAX_PAGE_BYTES = 512 * 1024
TEXT = "text"
HEX = "hex"
FORMATS = (TEXT, HEX)


class RecordQueryError(ConfigError):
    """A record browser query that cannot be answered as asked (HTTP 400)."""


@dataclass(frozen=True)
class RecordQuery:
    topic: str
    partition: int
    offset: int | None  # exactly one of offset and timestamp_ms is given
    timestamp_ms: int | None
    limit: int = DEFAULT_RECORDS
    format: str = TEXT


def _integer(params: Mapping[str, str], name: str, minimum: int) -> int | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise RecordQueryError(f"{name} must be a whole number, not {value!r}") from None
    if number < minimum:
        raise RecordQueryError(f"{name} must be {minimum} or more, not {number}")
    return number


def parse_timestamp(value: str) -> int:
    """Milliseconds since the epoch, from a number of them or an ISO 8601 time (UTC
    unless it says otherwise)."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise RecordQueryError(
            f"timestamp must be milliseconds since the epoch or an ISO 8601 time such as "
            f"2024-05-01T12:00:00Z, not {value!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def parse_query(params: Mapping[str, str]) -> RecordQuery:
    """The query a request's parameters ask; RecordQueryError saying what is wrong."""
    topic = params.get("topic", "").strip()
    if not topic:
        raise RecordQueryError("name a topic: ?topic=NAME&partition=N&offset=N")
    partition = _integer(params, "partition", 0)
    if partition is None:
        raise RecordQueryError("name a partition: &partition=N")
    offset = _integer(params, "offset", 0)
    stamp = params.get("timestamp", "").strip()
    if offset is not None and stamp:
        raise RecordQueryError("give an offset or a timestamp, not both")
    timestamp_ms = parse_timestamp(stamp) if stamp else None
    if offset is None and timestamp_ms is None:
        raise RecordQueryError("say where to start: &offset=N or &timestamp=TIME")
    limit = _integer(params, "limit", 1)
    if limit is not None and limit > MAX_RECORDS:
        raise RecordQueryError(f"limit must be at most {MAX_RECORDS}, not {limit}")
    shown_as = params.get("format", TEXT).strip() or TEXT
    if shown_as not in FORMATS:
        raise RecordQueryError(f"format must be {' or '.join(FORMATS)}, not {shown_as!r}")
    return RecordQuery(
        topic,
        partition,
        offset,
        timestamp_ms,
        DEFAULT_RECORDS if limit is None else limit,
        shown_as,
    )


def shown_bytes(data: bytes | None, shown_as: str) -> dict[str, object] | None:
    """A key, value or header value as the page shows it; None stays None."""
    if data is None:
        return None
    cut = data[:MAX_FIELD_BYTES]
    text = cut.hex() if shown_as == HEX else cut.decode("utf-8", errors="replace")
    return {"data": text, "size": len(data), "truncated": len(data) > MAX_FIELD_BYTES}


def record_size(record: ConsumerRecord) -> int:
    headers = sum(len(k) + len(v or b"") for k, v in record.headers)
    return len(record.key or b"") + len(record.value or b"") + headers


def record_json(record: ConsumerRecord, shown_as: str) -> dict[str, object]:
    return {
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "key": shown_bytes(record.key, shown_as),
        "value": shown_bytes(record.value, shown_as),
        "headers": [
            {"key": key, "value": shown_bytes(value, shown_as)} for key, value in record.headers
        ],
    }


def page_of(records: list[ConsumerRecord], limit: int) -> tuple[list[ConsumerRecord], bool]:
    """The records a page holds, in order, and whether the byte cap cut it short. The
    first record is always shown, however large (its fields are cut instead)."""
    page: list[ConsumerRecord] = []
    total = 0
    for record in records[:limit]:
        size = record_size(record)
        if page and total + size > MAX_PAGE_BYTES:
            return page, True
        page.append(record)
        total += size
    return page, False
