"""The broker's network edge: asyncio connections that turn frames into handler calls.

Each connection is served by one task that reads a frame, handles it and writes the
answer before reading the next, so answers leave in request order and a producer's
batches are appended in the order it sent them. Clients pipeline by sending ahead;
long-polling fetches should use their own connection.

Memory for requests is bounded: a frame's declared size is taken from one budget of
queued.max.request.bytes shared by all connections before its body is held, and given
back once the frame is handled and answered; a connection that finds the budget spent
is not read until then (spark_replica/transport.py).

Connections over max.connections, or over max.connections.per.ip from one address,
are closed as soon as they are accepted; a connection idle for connections.max.idle.ms,
or one whose request takes longer than socket.request.read.timeout.ms to arrive, is
closed by a periodic sweep (brokerd/connection_limits.py has the rules). The server's
task owns the table of connections; each connection's task only marks itself busy.

Security is per listener (brokerd/security_config.py): on a TLS listener a client's
first byte tells a TLS handshake from plaintext, and plaintext gets one answer saying
TLS is required; on a SASL listener a connection must authenticate before anything else
(brokerd/authentication.py); with an authorizer every request is checked against the
ACLs before its handler runs (brokerd/authorization.py).

Bad input never takes the broker down: a frame whose header cannot be read closes the
connection; a frame over the size limit gets a MESSAGE_TOO_LARGE answer, then the
connection closes (its body is never read); anything else gets a typed error answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from brokerd.api import HANDLERS, BrokerContext
from brokerd.authentication import (
    ANONYMOUS,
    BEFORE_LOGIN,
    FailedLogins,
    SaslSession,
    principal_of_certificate,
)
from brokerd.authorization import check, filter_metadata
from brokerd.connection_limits import ConnectionLimits, reap_reason, refusal
from spark_replica.errors import (
    BrokerResponseError,
    ConfigError,
    ConnectionLostError,
    IllegalSaslStateError,
    InvalidRequestError,
    MessageTooLargeError,
    ProtocolError,
    ReplogError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    UnknownServerError,
    UnsupportedVersionError,
    ZooKeeperConnectionError,
    wire_message,
)
from spark_replica.protocol import REQUEST_TYPES, is_supported
from spark_replica.protocol.apis import ApiKey
from spark_replica.protocol.frames import (
    Buffer,
    RequestHeader,
    ResponseHeader,
    encode_response,
)
from spark_replica.protocol.primitives import Reader, Writer
from spark_replica.security.scram import ScramCredential
from spark_replica.transport import (
    Frame,
    FrameStream,
    OversizedFrame,
    RequestBudget,
    serve_frame_streams,
)
from spark_replica.zk.security_store import read_credential

logger = logging.getLogger("brokerd.server")

# api key, api version and correlation id: enough to answer a frame we will not read.
_FIXED_HEADER_BYTES = 8


@dataclass(eq=False)
class _Connection:
    stream: FrameStream
    ip: str
    principal: str = ANONYMOUS
    sasl: SaslSession | None = None  # on a SASL listener, until and after login
    busy: bool = False  # a request is being handled
    answered_at: float = field(default_factory=time.monotonic)


@dataclass
class _Answer:
    """What to write back for one frame, and whether the connection ends after it (and
    how long to wait first: failed logins are answered slowly)."""

    buffers: list[Buffer] | None
    close_after_s: float | None = None


class RequestServer:
    def __init__(self, ctx: BrokerContext, host: str, port: int, max_frame_bytes: int) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        config = ctx.config
        self.limits = ConnectionLimits(
            config.max_connections,
            config.max_connections_per_ip,
            config.connections_max_idle_ms,
            config.socket_request_read_timeout_ms,
        )
        self.budget = RequestBudget(config.queued_max_request_bytes)
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._open_per_ip: collections.Counter[str] = collections.Counter()
        self._refusing = False  # warn once per run of refusals, not per connection
        self.security = config.security
        self._failed_logins = FailedLogins(config.security.failed_authentication_delay_ms / 1000)

    async def start(self) -> int:
        """Listen; return the bound port (useful when asked for port 0)."""
        self._server = await serve_frame_streams(
            self.host,
            self.port,
            self.max_frame_bytes,
            _FIXED_HEADER_BYTES,
            self._on_stream,
            self.budget,
            self.security.server_ssl_context(),
            self.ctx.config.socket_request_read_timeout_ms / 1000,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.create_task(self._sweep_forever())
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=5)
        if self._server is not None:
            await self._server.wait_closed()

    def _on_stream(self, stream: FrameStream) -> None:
        ip = _ip_of(stream.peer)
        reason = refusal(self.limits, len(self._connections), self._open_per_ip[ip])
        if reason is not None:
            stream.close()
            if not self._refusing:
                logger.warning("refusing connections from %s and others: %s", ip, reason)
            self._refusing = True
            return
        self._refusing = False
        self._open_per_ip[ip] += 1
        connection = _Connection(stream, ip)
        if self.security.uses_tls:
            connection.principal = principal_of_certificate(
                stream.transport.get_extra_info("peercert")
            )
        if self.security.uses_sasl:
            connection.sasl = SaslSession(self.security, self._credential)
        task = asyncio.create_task(self._serve(connection))
        self._connections[task] = connection
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        ip = self._connections.pop(task).ip
        self._open_per_ip[ip] -= 1
        if not self._open_per_ip[ip]:
            del self._open_per_ip[ip]

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.limits.sweep_interval_s)
            self._sweep(time.monotonic())

    def _sweep(self, now: float) -> None:
        for connection in list(self._connections.values()):
            protocol = connection.stream.protocol
            reason = reap_reason(
                self.limits,
                now,
                max(protocol.last_received, connection.answered_at),
                protocol.receiving_since,
                connection.busy,
            )
            if reason is not None:
                logger.info("closing connection from %s: %s", connection.stream.peer, reason)
                connection.stream.abort()

    async def _serve(self, connection: _Connection) -> None:
        stream = connection.stream
        try:
            while True:
                frame = await stream.read_frame()
                if isinstance(frame, OversizedFrame):
                    await self._refuse_oversized(stream, frame)
                    return
                try:
                    connection.busy = True
                    try:
                        answer = await self._handle(connection, frame)
                    finally:
                        connection.busy = False
                    if answer.buffers is not None:
                        await stream.write(answer.buffers)
                finally:
                    connection.answered_at = time.monotonic()
                    stream.release(frame)
                if answer.close_after_s is not None:
                    await asyncio.sleep(answer.close_after_s)
                    return
        except ConnectionLostError:
            pass
        except ProtocolError as exc:
            logger.warning("closing connection from %s: %s", stream.peer, exc)
        finally:
            stream.close()

    async def _refuse_oversized(self, stream: FrameStream, frame: OversizedFrame) -> None:
        header = Reader(frame.head)
        header.int16()
        header.int16()
        error = MessageTooLargeError(
            f"request of {frame.size} bytes is over the limit of {self.max_frame_bytes}"
        )
        await stream.write(_error_response(header.int32(), error))
        logger.warning("closing connection from %s: %s", stream.peer, error)

    async def _handle(self, connection: _Connection, frame: Frame) -> _Answer:
        reader = Reader(frame)
        header = RequestHeader.read(reader)
        correlation_id = header.correlation_id
        if connection.stream.protocol.plaintext_on_tls:
            error = SaslAuthenticationFailedError(
                f"this listener requires TLS ({self.security.protocol}): the client connected "
                "in plaintext; set security.protocol to SSL or SASL_SSL"
            )
            logger.info("closing connection from %s: plaintext on a TLS listener", connection.ip)
            return _Answer(_error_response(correlation_id, error), 0.0)
        if not is_supported(header.api_key, header.api_version):
            error = UnsupportedVersionError(
                f"api key {header.api_key} version {header.api_version} is not supported"
            )
            return _Answer(_error_response(correlation_id, error))
        api_key = ApiKey(header.api_key)
        try:
            request = REQUEST_TYPES[api_key].read(reader)
            reader.expect_end()
        except ProtocolError as exc:
            error = InvalidRequestError(f"malformed {api_key.name} request: {exc}")
            return _Answer(_error_response(correlation_id, error))
        sasl = connection.sasl
        if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            if sasl is None:
                error = IllegalSaslStateError(f"{api_key.name}: this listener does not use SASL")
                return _Answer(_error_response(correlation_id, error))
            return await self._authenticate(connection, sasl, api_key, request, correlation_id)
        if sasl is not None and not sasl.authenticated and api_key not in BEFORE_LOGIN:
            error = IllegalSaslStateError(
                f"{api_key.name} before authentication: this listener requires SASL "
                f"({self.security.protocol}); set security.protocol and the SASL settings"
            )
            return _Answer(_error_response(correlation_id, error), 0.0)
        authorizer = self.ctx.authorizer
        try:
            if authorizer is not None:
                check(authorizer, connection.principal, connection.ip, api_key, request)
            response = await HANDLERS[api_key](self.ctx, request)
        except BrokerResponseError as exc:
            return _Answer(_error_response(correlation_id, exc))
        except Exception as exc:
            logger.exception("%s request failed", api_key.name)
            return _Answer(_error_response(correlation_id, UnknownServerError(repr(exc))))
        if response is None:
            return _Answer(None)
        if authorizer is not None and api_key == ApiKey.METADATA:
            response = filter_metadata(
                authorizer, connection.principal, connection.ip, response, request.topics is None
            )
        return _Answer(_encode(api_key, correlation_id, response))

    async def _authenticate(
        self,
        connection: _Connection,
        sasl: SaslSession,
        api_key: ApiKey,
        request: Any,
        correlation_id: int,
    ) -> _Answer:
        try:
            response = await sasl.handle(api_key, request)
        except BrokerResponseError as exc:
            delay = self._failed_logins.record(connection.ip, time.monotonic())
            logger.warning("authentication from %s failed: %s", connection.ip, exc)
            return _Answer(_error_response(correlation_id, exc), delay)
        except ReplogError as exc:
            # ZooKeeper could not be asked for the credential: the client may retry.
            logger.warning("cannot authenticate %s now: %s", connection.ip, exc)
            error = RequestTimedOutError(f"cannot look up credentials now: {exc}")
            return _Answer(_error_response(correlation_id, error), 0.0)
        if sasl.principal is not None:
            connection.principal = sasl.principal
        return _Answer(_encode(api_key, correlation_id, response))

    async def _credential(self, username: str, mechanism: str) -> ScramCredential | None:
        zk = self.ctx.zk
        if zk is None:
            raise ZooKeeperConnectionError("the broker has no ZooKeeper session yet")
        try:
            return await asyncio.to_thread(read_credential, zk, username, mechanism)
        except ConfigError:
            return None  # a name no znode can have: no such user


def _encode(api_key: ApiKey, correlation_id: int, response: Any) -> list[Buffer]:
    body = Writer()
    try:
        response.write(body)
    except ProtocolError as exc:
        logger.exception("cannot encode the %s response", api_key.name)
        return _error_response(correlation_id, UnknownServerError(str(exc)))
    return encode_response(ResponseHeader(correlation_id, 0, None), body)


def _ip_of(peer: object) -> str:
    """The address part of a socket's peer name ("" when the socket has none)."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return ""


def _error_response(correlation_id: int, error: BrokerResponseError) -> list[Buffer]:
    return encode_response(ResponseHeader(correlation_id, error.code, wire_message(error)), None)
