"""The little HTTP/1.1 the console speaks, as bytes in and bytes out (no sockets here).

The console answers GET and HEAD of a handful of fixed paths (the record browser's with
a query string) and closes the connection after each answer, so a request is only its
head: the request line and headers, at most MAX_HEAD_BYTES. Bodies are never read.
Going the other way, the console scrapes the brokers' /metrics with HTTP/1.0 (the
server then closes after the body and never chunks it), and `parse_response` reads
that answer.

DNS rebinding: a page on an attacker's domain can have that name resolve to 127.0.0.1
and then read the console as if it were its own origin. The browser still names the
attacker's domain in the Host header, so a request is served only when its Host is a
name the console answers to (`check_host`): localhost, an IP address (a page whose
origin is an address is not another site), the address it was bound to, or a name the
operator allowed with --allow-host. Anything else gets 421 Misdirected Request.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus

from spark_replica.errors import ProtocolError, ReplogError
from spark_replica.http_head import encode_response, parse_request_line

# The request line and headers of one request; browsers send well under 8 KiB.
MAX_HEAD_BYTES = 16 * 1024
MAX_HEADERS = 100
HEAD_END = b"\r\n\r\n"
ALLOWED_METHODS = ("GET", "HEAD")


class HttpRequestError(ReplogError):
    """A request the console cannot serve; `status` is the HTTP answer it gets."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query string
    headers: dict[str, str]  # names lower-cased
    query: str = ""  # after the "?", undecoded

    @property
    def params(self) -> dict[str, str]:
        """The query's parameters, decoded; the last of a repeated name wins."""
        return dict(urllib.parse.parse_qsl(self.query, keep_blank_values=True))


def parse_request_head(head: bytes) -> Request:
    """The request line and headers (up to and including the blank line) -> Request."""
    if len(head) > MAX_HEAD_BYTES:
        raise HttpRequestError(
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
            f"request head over {MAX_HEAD_BYTES} bytes",
        )
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise HttpRequestError(HTTPStatus.BAD_REQUEST, "request head is not ASCII") from None
    lines = text.removesuffix("\r\n\r\n").split("\r\n")
    request_line = parse_request_line(head)
    if request_line is None:
        raise HttpRequestError(HTTPStatus.BAD_REQUEST, f"malformed request line {lines[0]!r}")
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpRequestError(
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"over {MAX_HEADERS} headers"
        )
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HttpRequestError(HTTPStatus.BAD_REQUEST, f"malformed header line {line!r}")
        headers[name.lower()] = value.strip()
    if request_line.method not in ALLOWED_METHODS:
        raise HttpRequestError(
            HTTPStatus.METHOD_NOT_ALLOWED,
            f"{request_line.method} not allowed: the console is read-only",
        )
    target = lines[0].split(" ")[1]
    return Request(request_line.method, request_line.path, headers, target.partition("?")[2])


LOCAL_NAMES = frozenset({"localhost"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def host_name(host_header: str) -> str | None:
    """The name or address a Host header value names, without its port, lower-cased and
    without a trailing dot (`[::1]:8080` -> `::1`); None if it is malformed."""
    value = host_header.strip().lower()
    if value.startswith("["):
        address, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return address or None
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names the console answers to besides addresses: localhost, the name it was
    bound to (unless a wildcard) and the operator's --allow-host names."""
    names = set(LOCAL_NAMES)
    if bind_host not in WILDCARD_HOSTS:
        names.add(bind_host.lower().strip("[]").rstrip("."))
    for name in extra:
        parsed = host_name(name)
        if parsed is not None:
            names.add(parsed)
    return frozenset(names)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_host(request: Request, allowed: frozenset[str]) -> None:
    """Refuse a request whose Host header is missing or names a host not served here."""
    value = request.headers.get("host")
    if value is None:
        raise HttpRequestError(HTTPStatus.BAD_REQUEST, "no Host header")
    name = host_name(value)
    if name is None:
        raise HttpRequestError(HTTPStatus.BAD_REQUEST, f"malformed Host header {value!r}")
    if name not in allowed and not _is_address(name):
        raise HttpRequestError(
            HTTPStatus.MISDIRECTED_REQUEST,
            f"this console does not answer to {name!r}; start it with --allow-host {name} "
            "to reach it by that name",
        )


@dataclass(frozen=True)
class Response:
    status: HTTPStatus
    content_type: str
    body: bytes

    def encode(self, *, head_only: bool = False) -> bytes:
        """The whole answer, headers included; `head_only` for a HEAD request."""
        headers = [
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            # Everything the page uses is served from here: no CDN, no inline script.
            "Content-Security-Policy: default-src 'self'; img-src 'self' data:",
        ]
        if self.status == HTTPStatus.METHOD_NOT_ALLOWED:
            headers.append("Allow: " + ", ".join(ALLOWED_METHODS))
        return encode_response(
            self.status, self.content_type, self.body, headers, head_only=head_only
        )


def error_response(status: HTTPStatus, message: str) -> Response:
    return Response(status, "text/plain; charset=utf-8", f"{status.phrase}: {message}\n".encode())


def metrics_request(host: str, port: int, path: str, authorization: str | None = None) -> bytes:
    login = "" if authorization is None else f"Authorization: {authorization}\r\n"
    return (
        f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nAccept: text/plain\r\n"
        f"{login}User-Agent: replog-console\r\n\r\n"
    ).encode("ascii")


def parse_response(data: bytes) -> tuple[int, bytes]:
    """A whole HTTP/1.x answer read to its end -> (status code, body).

    With a Content-Length the body is cut to it; without one it runs to the end, as
    HTTP/1.0 says. A truncated or malformed answer is a ProtocolError.
    """
    head, separator, body = data.partition(HEAD_END)
    if not separator:
        raise ProtocolError("HTTP answer ends before its headers do")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"malformed HTTP status line {lines[0]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            if not value.strip().isdigit():
                raise ProtocolError(f"malformed Content-Length {value.strip()!r}")
            length = int(value)
        elif name.strip().lower() == "transfer-encoding":
            raise ProtocolError(
                f"unexpected Transfer-Encoding {value.strip()!r} in an HTTP/1.0 answer"
            )
    if length is not None:
        if len(body) < length:
            raise ProtocolError(f"HTTP body cut short: {len(body)} of {length} bytes")
        body = body[:length]
    return int(parts[1]), body
