"""One TCP connection to one broker, with pipelined requests matched by correlation id.

Many requests may be in flight at once; a single reader task decodes each answer and
completes the future waiting for its correlation id. When the connection breaks every
waiting request fails with ConnectionLostError (retriable: the request may or may not
have landed), and the connection is not reused.

Before anything else (SASL included) a connection asks its broker which versions it
serves, and sends every request at the highest version both sides know
(spark_replica/wire/native/negotiation.py); each answer is read at its request's version.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any

from spark_replica.client import request_log
from spark_replica.client.sasl_login import sasl_login
from spark_replica.errors import (
    ConnectionLostError,
    ProtocolError,
    UnsupportedVersionError,
    error_for_code,
)
from spark_replica.transport import Frame, FrameStream, OversizedFrame, open_frame_stream
from spark_replica.wire.native import RESPONSE_TYPES
from spark_replica.wire.native.api_versions import ApiVersionsRequest
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    RequestHeader,
    ResponseHeader,
    encode_request,
)
from spark_replica.wire.native.negotiation import BrokerVersions, request_version
from spark_replica.wire.native.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
)
from spark_replica.wire.primitives import Reader, Writer

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

DEFAULT_CONNECT_TIMEOUT_S = 10.0


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "replog",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        security: SecurityConfig | None = None,
    ) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._stream: FrameStream | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], ApiKey, int]] = {}
        # What the broker serves; until its ApiVersions answer, the opening version only.
        self._broker_versions = BrokerVersions.version_zero_only()
        self._correlation_ids = itertools.count(1)
        self._read_task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_usable(self) -> bool:
        return self._stream is not None and self._failure is None

    async def connect(self, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        try:
            self._stream = await open_frame_stream(
                self.host,
                self.port,
                self.max_frame_bytes,
                timeout_s,
                None if self.security is None else self.security.client_ssl_context(),
            )
        except ConnectionLostError as exc:
            request_log.not_connected(self.address, exc)
            raise ConnectionLostError(f"cannot connect to broker at {self.address}: {exc}") from exc
        request_log.connected(self.address, "replog")
        self._read_task = asyncio.create_task(self._read_responses())
        try:
            await self._learn_versions(timeout_s)
            if self.security is not None and self.security.uses_sasl:
                await sasl_login(_NativeSasl(self, timeout_s), self.security, self.address)
        except BaseException:
            await self.close()
            raise

    async def _learn_versions(self, timeout_s: float) -> None:
        """Ask the broker which versions it serves; UNSUPPORTED_VERSION means version 0
        only. Any other refusal (plaintext on a TLS listener) is the connection's error."""
        try:
            answer = await self.send(ApiVersionsRequest(), timeout_s=timeout_s)
        except UnsupportedVersionError:
            return
        self._broker_versions = BrokerVersions.from_answer(answer)

    async def send(
        self, request: Any, *, expect_response: bool = True, timeout_s: float = 30.0
    ) -> Any:
        """Send a request; return its decoded response, or raise its typed error."""
        if not self.is_usable or self._stream is None:
            raise self._failure or ConnectionLostError(f"connection to {self.address} is closed")
        version = request_version(self._broker_versions, request)
        correlation_id = next(self._correlation_ids)
        body = Writer()
        request.write(body, version)
        frame = encode_request(
            RequestHeader(int(request.API_KEY), version, correlation_id, self.client_id), body
        )
        future: asyncio.Future[Any] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = (future, request.API_KEY, version)
        try:
            await self._stream.write(frame)
        except ConnectionLostError as exc:
            self._fail(ConnectionLostError(f"lost connection to {self.address}: {exc}"))
        if future is None:
            if self._failure is not None:
                raise self._failure
            return None
        since = request_log.started()
        try:
            response = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            # As Kafka's clients do: a broker that does not answer in time is treated as
            # gone, so the next request opens a fresh connection (or goes elsewhere)
            # instead of queueing behind a stalled one.
            error = ConnectionLostError(f"no answer from {self.address} within {timeout_s:.1f} s")
            self._fail(error)
            self._log(request, version, correlation_id, since, error)
            raise error from None
        except BaseException as exc:
            self._log(request, version, correlation_id, since, exc)
            raise
        self._log(request, version, correlation_id, since, None)
        return response

    def _log(
        self,
        request: Any,
        version: int,
        correlation_id: int,
        since: float,
        error: BaseException | None,
    ) -> None:
        name = request_log.api_name(int(request.API_KEY), version)
        request_log.answered(self.address, name, correlation_id, since, error)

    async def _read_responses(self) -> None:
        assert self._stream is not None
        try:
            while True:
                frame = await self._stream.read_frame()
                if isinstance(frame, OversizedFrame):
                    raise ProtocolError(f"response frame of {frame.size} bytes is over the limit")
                self._dispatch(frame)
        except ConnectionLostError as exc:
            self._fail(ConnectionLostError(f"connection to {self.address} closed: {exc}"))
        except ProtocolError as exc:
            self._fail(ConnectionLostError(f"bad response from {self.address}: {exc}"))

    def _dispatch(self, frame: Frame) -> None:
        reader = Reader(frame)
        header = ResponseHeader.read(reader)
        entry = self._pending.pop(header.correlation_id, None)
        if entry is None:
            return
        future, api_key, version = entry
        if future.done():
            return
        if header.error_code:
            future.set_exception(error_for_code(header.error_code, header.error_message or ""))
            return
        try:
            future.set_result(RESPONSE_TYPES[api_key].read(reader, version))
        except ProtocolError as exc:
            future.set_exception(exc)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        pending, self._pending = self._pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(error)
        if self._stream is not None:
            self._stream.close()

    async def close(self) -> None:
        self._fail(ConnectionLostError(f"connection to {self.address} was closed"))
        if self._read_task is not None:
            self._read_task.cancel()
            # wait(), not a suppressed await: if the task closing us is itself cancelled
            # (e.g. at shutdown), that cancellation must reach it, not be swallowed here.
            await asyncio.wait({self._read_task})


class _NativeSasl:
    """SaslExchange on the replog listener: its own request types; a refusal arrives as
    the typed error of the answer's header."""

    def __init__(self, connection: BrokerConnection, timeout_s: float) -> None:
        self._connection = connection
        self._timeout_s = timeout_s

    async def handshake(self, mechanism: str) -> None:
        await self._connection.send(SaslHandshakeRequest(mechanism), timeout_s=self._timeout_s)

    async def authenticate(self, auth_bytes: bytes) -> bytes:
        response: SaslAuthenticateResponse = await self._connection.send(
            SaslAuthenticateRequest(auth_bytes), timeout_s=self._timeout_s
        )
        return response.auth_bytes
