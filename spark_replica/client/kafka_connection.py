"""One connection to one broker's Kafka listener, requests sent one at a time.

The Kafka-protocol side of the client (kafka_admin.py, an operator's tool, and tests
that speak the Kafka protocol directly) talks to replog's Kafka listeners with the wire
engine's tables, at fixed versions the listener serves (no ApiVersions round: it only
talks to replog). It shares the rest with BrokerConnection: frames and TLS through
transport.open_frame_stream, the SASL login's steps through sasl_login.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any

from spark_replica.errors import (
    ConnectionLostError,
    ProtocolError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from spark_replica.transport import FrameStream, OversizedFrame, open_frame_stream
from spark_replica.wire.kafka.headers import decode_response, encode_request
from spark_replica.wire.schema import Data

from . import request_log
from .sasl_login import sasl_login

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

# (api key, the version this client sends) of the login's requests.
SASL_HANDSHAKE = (17, 1)
SASL_AUTHENTICATE = (36, 1)
MAX_RESPONSE_BYTES = 100 * 1024 * 1024

Address = tuple[str, int]


class KafkaConnection:
    """One connection to one broker's Kafka listener; requests are sent one at a time."""

    def __init__(
        self, address: Address, security: SecurityConfig, client_id: str, timeout_s: float
    ) -> None:
        self.address = address
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation_ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._stream: FrameStream | None = None

    @property
    def name(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    async def connect(self) -> None:
        host, port = self.address
        try:
            self._stream = await open_frame_stream(
                host, port, MAX_RESPONSE_BYTES, self.timeout_s, self.security.client_ssl_context()
            )
        except ConnectionLostError as exc:
            request_log.not_connected(self.name, exc)
            raise ConnectionLostError(f"cannot connect to {self.name}: {exc}") from exc
        request_log.connected(self.name, "Kafka")
        if self.security.uses_sasl:
            try:
                await sasl_login(_KafkaSasl(self), self.security, self.name)
            except BaseException:
                await self.close()
                raise

    async def call(self, api: tuple[int, int], body: Any) -> Data:
        """Send one request and return its decoded response body."""
        since = request_log.started()
        try:
            response, correlation_id = await self._call(api, body)
        except BaseException as exc:
            request_log.answered(self.name, request_log.api_name(*api), 0, since, exc)
            raise
        request_log.answered(self.name, request_log.api_name(*api), correlation_id, since, None)
        return response

    async def _call(self, api: tuple[int, int], body: Any) -> tuple[Data, int]:
        api_key, version = api
        async with self._lock:
            stream = self._stream
            if stream is None:
                raise ConnectionLostError(f"connection to {self.name} is closed")
            correlation_id = next(self._correlation_ids)
            try:
                await stream.write(
                    encode_request(api_key, version, correlation_id, self.client_id, body)
                )
                frame = await asyncio.wait_for(stream.read_frame(), self.timeout_s)
            except (ConnectionLostError, TimeoutError) as exc:
                await self.close()
                raise ConnectionLostError(f"lost connection to {self.name}: {exc!r}") from exc
            if isinstance(frame, OversizedFrame):
                await self.close()
                raise ProtocolError(f"{self.name} sent a response frame of {frame.size} bytes")
        answered, response = decode_response(api_key, version, frame)
        if answered != correlation_id:
            await self.close()
            raise ProtocolError(
                f"{self.name} answered correlation id {answered}, expected {correlation_id}"
            )
        return response, correlation_id

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


class _KafkaSasl:
    """SaslExchange on a Kafka listener: a refusal is an error code in the answer body."""

    def __init__(self, connection: KafkaConnection) -> None:
        self._connection = connection

    async def handshake(self, mechanism: str) -> None:
        answer = await self._connection.call(SASL_HANDSHAKE, Data(mechanism=mechanism))
        if answer.error_code:
            raise UnsupportedSaslMechanismError(
                f"{mechanism} is not enabled (the broker offers {answer.mechanisms})"
            )

    async def authenticate(self, auth_bytes: bytes) -> bytes:
        answer = await self._connection.call(SASL_AUTHENTICATE, Data(auth_bytes=auth_bytes))
        if answer.error_code:
            raise SaslAuthenticationFailedError(answer.error_message or "refused")
        return bytes(answer.auth_bytes)
