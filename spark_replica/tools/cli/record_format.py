"""How records look as lines of text, in (`replog produce`) and out (`replog consume`). Pure.

In: a line is `[HEADERS<headers-delimiter>][KEY<key-separator>]VALUE`, the layout of
Kafka's console producer with `parse.headers=true` and `parse.key=true`. HEADERS is
`name:value,name:value` (the header separator between headers, the header key separator
between a name and its value); an empty HEADERS part means no headers. Separators are
literal bytes, never patterns; the three that split headers must differ from one
another, or headers could be read two ways (as Kafka checks). A line that does not fit
is refused with a ConfigError naming its number.

Out, as text: Kafka's console consumer's layout and property names (print.timestamp,
print.partition, print.offset, print.headers, print.key, print.value, key.separator,
headers.separator, line.separator, null.literal), fields in that order, each followed by
key.separator: `CreateTime:1700000000000<TAB>Partition:0<TAB>Offset:42<TAB>h:v<TAB>key<TAB>value`.
A property this does not know is a ConfigError, not silently ignored, and booleans are
`true` or `false`, nothing else.

Out, as JSON (`--format json`): one object per record and line, with `topic`,
`partition`, `offset`, `timestamp` (milliseconds), `timestamp_type` (`CreateTime` or
`LogAppendTime`), `key`, `value` and `headers` (a list of `{"key": name, "value": v}` in
record order, since names may repeat). Bytes that are valid UTF-8 are JSON strings; any
other bytes are an object `{"base64": "..."}` holding them base64-encoded; a null key,
value or header value is JSON null.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from spark_replica.client import LOG_APPEND_TIME, ConsumerRecord
from spark_replica.client.accumulator import Headers
from spark_replica.errors import ConfigError

DEFAULT_KEY_SEPARATOR = "\t"
DEFAULT_HEADERS_DELIMITER = "\t"
DEFAULT_HEADER_SEPARATOR = ","
DEFAULT_HEADER_KEY_SEPARATOR = ":"

EARLIEST_NAME = "earliest"
LATEST_NAME = "latest"


# --------------------------------------------------------------------------- lines in


@dataclass(frozen=True)
class ParsedLine:
    key: bytes | None
    value: bytes
    headers: Headers | None  # None when the line gave none


@dataclass(frozen=True)
class LineFormat:
    """How `replog produce` splits a line; None for a part the lines do not carry."""

    key_separator: bytes | None = None
    headers_delimiter: bytes | None = None
    header_separator: bytes = DEFAULT_HEADER_SEPARATOR.encode()
    header_key_separator: bytes = DEFAULT_HEADER_KEY_SEPARATOR.encode()

    def __post_init__(self) -> None:
        if self.key_separator is not None and not self.key_separator:
            raise ConfigError("--key-separator must not be empty")
        if self.headers_delimiter is None:
            return
        # The headers part is cut off first, so only its three separators can clash.
        named = {
            "--headers-delimiter": self.headers_delimiter,
            "--header-separator": self.header_separator,
            "--header-key-separator": self.header_key_separator,
        }
        seen: dict[bytes, str] = {}
        for flag, separator in named.items():
            if not separator:
                raise ConfigError(f"{flag} must not be empty")
            if separator in seen:
                raise ConfigError(
                    f"{seen[separator]} and {flag} are both {separator.decode()!r}: "
                    "a line's headers could be split two ways"
                )
            seen[separator] = flag

    def parse(self, line: bytes, number: int) -> ParsedLine:
        """Split one line (without its end of line) into headers, key and value."""
        headers: Headers | None = None
        rest = line
        if self.headers_delimiter is not None:
            part, found, rest = line.partition(self.headers_delimiter)
            if not found:
                raise ConfigError(
                    f"line {number} has no headers delimiter {self.headers_delimiter.decode()!r}"
                )
            headers = self._headers(part, number) if part else None
        if self.key_separator is None:
            return ParsedLine(None, rest, headers)
        key, found, value = rest.partition(self.key_separator)
        if not found:
            raise ConfigError(f"line {number} has no key separator {self.key_separator.decode()!r}")
        return ParsedLine(key, value, headers)

    def _headers(self, part: bytes, number: int) -> Headers:
        headers: Headers = []
        for pair in part.split(self.header_separator):
            name, found, value = pair.partition(self.header_key_separator)
            if not found:
                raise ConfigError(
                    f"line {number}: header {pair.decode(errors='replace')!r} has no "
                    f"header key separator {self.header_key_separator.decode()!r}"
                )
            try:
                headers.append((name.decode(), value))
            except UnicodeDecodeError:
                raise ConfigError(f"line {number}: a header name is not UTF-8") from None
        return headers


# --------------------------------------------------------------------------- where to start


def parse_offset(text: str) -> int | str:
    """`--offset`: a non-negative offset, or `earliest` or `latest` (as Kafka's)."""
    lowered = text.strip().lower()
    if lowered in (EARLIEST_NAME, LATEST_NAME):
        return lowered
    try:
        offset = int(lowered)
    except ValueError:
        offset = -1
    if offset < 0:
        raise ConfigError(
            f"--offset {text!r}: use a non-negative offset, {EARLIEST_NAME} or {LATEST_NAME}"
        )
    return offset


# --------------------------------------------------------------------------- records out


@dataclass(frozen=True)
class TextFormat:
    """Kafka's console consumer formatter settings, under their property names."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    headers_separator: bytes = b","
    line_separator: bytes = b"\n"
    null_literal: bytes = b"null"

    def format(self, record: ConsumerRecord, timestamp_type: int) -> bytes:
        parts: list[bytes] = []
        if self.print_timestamp:
            parts.append(f"{timestamp_type_name(timestamp_type)}:{record.timestamp_ms}".encode())
        if self.print_partition:
            parts.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            parts.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            parts.append(self._headers(record.headers))
        if self.print_key:
            parts.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            parts.append(self.null_literal if record.value is None else record.value)
        return self.key_separator.join(parts) + self.line_separator

    def _headers(self, headers: Sequence[tuple[str, bytes | None]]) -> bytes:
        if not headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(
            name.encode() + b":" + (self.null_literal if value is None else value)
            for name, value in headers
        )


PROPERTY_FIELDS = {field.name.replace("_", "."): field.name for field in fields(TextFormat)}


def parse_properties(assignments: Sequence[str], base: TextFormat | None = None) -> TextFormat:
    """`--property name=value` settings on top of `base`; ConfigError for an unknown one."""
    settings: dict[str, Any] = {}
    for assignment in assignments:
        name, value = split_property(assignment)
        attribute = PROPERTY_FIELDS.get(name)
        if attribute is None:
            known = ", ".join(sorted(PROPERTY_FIELDS))
            raise ConfigError(f"--property {name!r} is not known; use one of {known}")
        if attribute.startswith("print_"):
            settings[attribute] = parse_bool(name, value)
        else:
            settings[attribute] = value.encode()
    return replace(base or TextFormat(), **settings)


def split_property(assignment: str) -> tuple[str, str]:
    name, found, value = assignment.partition("=")
    if not found:
        raise ConfigError(f"--property {assignment!r}: use name=value")
    return name.strip(), value


PRODUCER_PROPERTIES = (
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
)


def parse_producer_properties(assignments: Sequence[str], base: LineFormat) -> LineFormat:
    """Kafka's console producer's `--property` names on top of the flags' `base`:
    key.separator (default TAB) splits a key only with parse.key=true, as in Kafka, and
    the headers' separators apply only with parse.headers=true."""
    parse_key = base.key_separator is not None
    key_separator = base.key_separator or DEFAULT_KEY_SEPARATOR.encode()
    parse_headers = base.headers_delimiter is not None
    headers_delimiter = base.headers_delimiter or DEFAULT_HEADERS_DELIMITER.encode()
    header_separator, header_key_separator = base.header_separator, base.header_key_separator
    for assignment in assignments:
        name, value = split_property(assignment)
        if name == "parse.key":
            parse_key = parse_bool(name, value)
        elif name == "key.separator":
            key_separator = value.encode()
        elif name == "parse.headers":
            parse_headers = parse_bool(name, value)
        elif name == "headers.delimiter":
            headers_delimiter = value.encode()
        elif name == "headers.separator":
            header_separator = value.encode()
        elif name == "headers.key.separator":
            header_key_separator = value.encode()
        else:
            known = ", ".join(PRODUCER_PROPERTIES)
            raise ConfigError(f"--property {name!r} is not known; use one of {known}")
    return LineFormat(
        key_separator=key_separator if parse_key else None,
        headers_delimiter=headers_delimiter if parse_headers else None,
        header_separator=header_separator,
        header_key_separator=header_key_separator,
    )


def parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"--property {name}={value!r}: use true or false")
    return lowered == "true"


def timestamp_type_name(timestamp_type: int) -> str:
    return "LogAppendTime" if timestamp_type == LOG_APPEND_TIME else "CreateTime"


def json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text as a string; other bytes as {"base64": ...}, so nothing is mangled."""
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def format_json(record: ConsumerRecord, timestamp_type: int) -> bytes:
    document = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "timestamp_type": timestamp_type_name(timestamp_type),
        "key": json_bytes(record.key),
        "value": json_bytes(record.value),
        "headers": [{"key": name, "value": json_bytes(value)} for name, value in record.headers],
    }
    return json.dumps(document, ensure_ascii=False).encode() + b"\n"
