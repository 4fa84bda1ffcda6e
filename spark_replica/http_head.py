"""HTTP/1.x heads as bytes in and out, for the two small servers replog runs: a broker's
/metrics endpoint and the web console.

Both answer one request per connection and then close it, so a request is only its head
(a body is never read) and an answer is a status line, a few headers and a body with its
length. Sockets stay with the servers; this module is pure and unit-tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus


@dataclass(frozen=True, slots=True)
class RequestLine:
    method: str
    path: str  # without the query string


def parse_request_line(head: bytes) -> RequestLine | None:
    """The method and path of an HTTP/1.x request head; None if it is not one (a target
    that is not a path, such as a proxy's absolute URL, is not one either)."""
    line = head.split(b"\r\n", 1)[0]
    try:
        method, target, version = line.decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        return None
    if not version.startswith("HTTP/1.") or not method.isalpha() or not target.startswith("/"):
        return None
    return RequestLine(method, target.split("?", 1)[0])


def header_value(head: bytes, name: str) -> str | None:
    """The value of the first header called `name` (any case) in a request head, stripped;
    None if there is none or the head is not ASCII."""
    try:
        lines = head.decode("ascii").split("\r\n")[1:]
    except UnicodeDecodeError:
        return None
    wanted = name.lower()
    for line in lines:
        key, colon, value = line.partition(":")
        if colon and key.lower() == wanted:
            return value.strip()
    return None


def encode_response(
    status: HTTPStatus,
    content_type: str,
    body: bytes,
    headers: Sequence[str] = (),
    *,
    head_only: bool = False,
) -> bytes:
    """A whole answer that closes the connection; `head_only` leaves the body out (HEAD)."""
    lines = [
        f"HTTP/1.1 {status.value} {status.phrase}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        *headers,
        "Connection: close",
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return head if head_only else head + body
