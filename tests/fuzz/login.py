"""A SCRAM login on a raw connection to either listener, for the fuzzer's own sockets.

The fuzzer's connections are raw (so that nothing tidies up what it sends), but with
`--sasl` a share of them log in first, so that fuzzed requests also reach the handlers
behind the login, and the health probe must log in to ask Metadata at all. The steps are
written once, as a generator of request frames that is sent each answer's payload
(h11's shape: no I/O here), and driven by a blocking socket or by asyncio streams.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Generator
from dataclasses import dataclass, field

from spark_replica.errors import SaslAuthenticationFailedError
from spark_replica.security.scram import ScramClient
from spark_replica.wire.kafka.versions import REQUESTS, RESPONSES
from spark_replica.wire.native import ApiKey
from spark_replica.wire.native.frames import SIZE, ResponseHeader
from spark_replica.wire.native.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
)
from spark_replica.wire.primitives import Reader
from spark_replica.wire.schema import Data
from tests.fuzz.requests import body_of, frame, header_bytes, request_frame

MECHANISM = "SCRAM-SHA-256"
KAFKA_SASL_VERSION = 1
LOGIN_CORRELATION_BASE = 0x51000000
REPLOG, KAFKA = "replog", "kafka"

# Frames to send out, answer payloads (correlation id on) back in.
LoginSteps = Generator[bytes, bytes, None]


@dataclass(frozen=True)
class Login:
    """Who the fuzzer's connections log in as, on which listener's protocol."""

    listener: str
    username: str
    password: str = field(repr=False)


def login_steps(login: Login) -> LoginSteps:
    """Handshake, client-first, client-final; SaslAuthenticationFailedError if refused."""
    client = ScramClient(MECHANISM, login.username, login.password)
    if login.listener == KAFKA:
        handshake = yield _kafka_request(ApiKey.SASL_HANDSHAKE, MECHANISM)
        _kafka_answer(ApiKey.SASL_HANDSHAKE, handshake)
        first = yield _kafka_request(ApiKey.SASL_AUTHENTICATE, client.first_message())
        server_first = _kafka_answer(ApiKey.SASL_AUTHENTICATE, first)
        final = yield _kafka_request(ApiKey.SASL_AUTHENTICATE, client.final_message(server_first))
        client.verify_server_final(_kafka_answer(ApiKey.SASL_AUTHENTICATE, final))
        return
    _replog_answer((yield _replog_request(SaslHandshakeRequest(MECHANISM))))
    first = yield _replog_request(SaslAuthenticateRequest(client.first_message()))
    server_first = _replog_answer(first)
    final = yield _replog_request(SaslAuthenticateRequest(client.final_message(server_first)))
    client.verify_server_final(_replog_answer(final))


def _replog_request(request: SaslHandshakeRequest | SaslAuthenticateRequest) -> bytes:
    return request_frame(request.API_KEY, body_of(request), LOGIN_CORRELATION_BASE)


def _replog_answer(payload: bytes) -> bytes:
    reader = Reader(payload)
    header = ResponseHeader.read(reader)
    if header.error_code:
        raise SaslAuthenticationFailedError(f"login refused: {header}")
    if not reader.remaining():
        return b""  # the handshake's answer
    return SaslAuthenticateResponse.read(reader).auth_bytes


def _kafka_request(api_key: ApiKey, value: str | bytes) -> bytes:
    fields = {"mechanism": value} if api_key == ApiKey.SASL_HANDSHAKE else {"auth_bytes": value}
    body = REQUESTS[api_key].to_bytes(KAFKA_SASL_VERSION, Data(**fields))
    header = header_bytes(
        api_key, LOGIN_CORRELATION_BASE, version=KAFKA_SASL_VERSION, client_id="fuzz"
    )
    return frame(header + body)


def _kafka_answer(api_key: ApiKey, payload: bytes) -> bytes:
    answer = RESPONSES[api_key].from_bytes(KAFKA_SASL_VERSION, payload[4:])
    if answer.error_code:
        raise SaslAuthenticationFailedError(f"login refused: error {answer.error_code}")
    return bytes(getattr(answer, "auth_bytes", b"") or b"")


def login_socket(sock: socket.socket, login: Login) -> None:
    """Log in on a blocking socket (its timeout bounds each read)."""
    steps = login_steps(login)
    request = next(steps)
    while True:
        sock.sendall(request)
        try:
            request = steps.send(_read_payload_socket(sock))
        except StopIteration:
            return


async def login_stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, login: Login
) -> None:
    """Log in on asyncio streams; the caller bounds the whole with a timeout."""
    steps = login_steps(login)
    request = next(steps)
    while True:
        writer.write(request)
        (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
        try:
            request = steps.send(await reader.readexactly(size))
        except StopIteration:
            return


def _read_payload_socket(sock: socket.socket) -> bytes:
    (size,) = SIZE.unpack(_recv_exactly(sock, SIZE.size))
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)
