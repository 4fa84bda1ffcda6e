"""The console's HTTP bytes: request heads parsed or refused with the right status, answers
encoded, the brokers' /metrics answers read."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from spark_replica.errors import ProtocolError
from spark_replica.tools.console.http import (
    MAX_HEAD_BYTES,
    HttpRequestError,
    Response,
    parse_request_head,
    parse_response,
)


def test_a_get_is_parsed_without_its_query_string() -> None:
    request = parse_request_head(
        b"GET /api/cluster?x=1 HTTP/1.1\r\nHost: localhost:8080\r\nAccept: */*\r\n\r\n"
    )
    assert (request.method, request.path) == ("GET", "/api/cluster")
    assert request.headers == {"host": "localhost:8080", "accept": "*/*"}


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /api/cluster HTTP/1.1\r\n\r\n", HTTPStatus.METHOD_NOT_ALLOWED),
        (b"DELETE / HTTP/1.1\r\n\r\n", HTTPStatus.METHOD_NOT_ALLOWED),
        (b"GET /\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (b"GET / SPDY/3\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (b"GET http://elsewhere/ HTTP/1.1\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (b"GET /\xff HTTP/1.1\r\n\r\n", HTTPStatus.BAD_REQUEST),
        (
            b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n",
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
        ),
        (
            b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n",
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
        ),
    ],
)
def test_bad_requests_are_refused_with_their_status(head: bytes, status: HTTPStatus) -> None:
    with pytest.raises(HttpRequestError) as refused:
        parse_request_head(head)
    assert refused.value.status == status


def test_a_response_has_its_length_and_closes_and_head_drops_the_body() -> None:
    response = Response(HTTPStatus.OK, "application/json", b'{"a":1}')
    encoded = response.encode()
    head, _, body = encoded.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Length: 7" in head
    assert b"Connection: close" in head
    assert body == b'{"a":1}'
    assert response.encode(head_only=True) == head + b"\r\n\r\n"


def test_a_refused_method_says_which_are_allowed() -> None:
    encoded = Response(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"").encode()
    assert b"Allow: GET, HEAD\r\n" in encoded


def test_a_metrics_answer_is_cut_to_its_content_length_or_read_to_the_end() -> None:
    with_length = b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabcdef"
    assert parse_response(with_length) == (200, b"abc")
    without = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\ndown"
    assert parse_response(without) == (503, b"down")


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.0 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Le",
        b"SSH-2.0-OpenSSH\r\n\r\n",
    ],
)
def test_a_broken_metrics_answer_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_response(data)


def test_the_query_string_is_kept_apart_and_decoded() -> None:
    request = parse_request_head(
        b"GET /api/records?topic=a%20b&offset=3&offset=4&format= HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    assert (request.path, request.query) == (
        "/api/records",
        "topic=a%20b&offset=3&offset=4&format=",
    )
    assert request.params == {"topic": "a b", "offset": "4", "format": ""}
