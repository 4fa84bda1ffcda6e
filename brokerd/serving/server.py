"""The broker's network edge: asyncio connections that turn frames into handler calls.

One RequestServer serves one listener, and the same machinery serves both of the
broker's protocols: replog's own (brokerd/native/dialect.py) and Kafka's
(brokerd/kafka/dialect.py), each driven by the one dispatch (brokerd/serving/dispatch.py).
What differs between them, reading a request and writing its answer, is the dialect;
everything else here is shared: connection
limits, the idle sweep, the request budget, TLS, and the SASL exchange (Logins).

Each connection is served by one task that reads a frame and handles it before reading
the next, so a producer's batches are appended in the order it sent them. What a request
then only waits for (an acks=all produce, for the HW) overlaps with the next requests, up
to five unanswered per connection, and answers leave in request order
(brokerd/serving/answer_order.py). Long-polling fetches still hold their connection until
they are answered: they should use their own.

Memory for requests is bounded: the bytes of frames received are charged to one budget
of queued.max.request.bytes shared by all connections as they arrive, and given back
once the frame is handled and answered; a connection that finds the budget spent is not
read until then, and one connection holds at most its phase's largest frame of it
(spark_replica/transport.py).

What a connection may send before it has logged in is decided once for both
protocols, from the table of brokerd/serving/connection_state.py: the dispatch reads a
frame's fixed header and asks the table before anything is decoded; a frame the phase
does not admit is refused from its fixed header alone. The phase also sets the
largest frame read (sasl.server.max.receive.size before login) and the login deadline
(sasl.server.authentication.timeout.ms) the sweep enforces.

Connections over max.connections, or over max.connections.per.ip from one address,
are closed as soon as they are accepted; a connection idle for connections.max.idle.ms,
or one whose request takes longer than socket.request.read.timeout.ms to arrive, is
closed by a periodic sweep (brokerd/serving/connection_limits.py has the rules). The server's
task owns the table of connections; each connection's task only counts its unanswered
requests (a connection with any is not idle).

Security is per listener (brokerd/config/security.py): on a TLS listener a client's
first byte tells a TLS handshake from plaintext (the dispatch decides how to refuse
plaintext); on a SASL listener a connection must authenticate before anything else
(brokerd/serving/authentication.py). Failed logins are remembered per address by the Logins
both listeners share, so guessing passwords is as slow on one port as on the other;
Logins also reads credentials off the loop and hashes SASL/PLAIN passwords on worker
threads, MAX_CONCURRENT_HASHING at a time.

Every answered frame is counted in the listener's request metrics under its API (the
first two bytes of a frame are the api key in both protocols), with the time from its
being taken up to its answer being written: a dict lookup and two increments each.

Bad input never takes the broker down: a frame whose header cannot be read closes the
connection; a frame over the size limit gets the dispatch's refusal (if its protocol
has one), then the connection closes (its body is never read).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar

from brokerd.core.context import BrokerContext
from brokerd.metrics import ListenerRequests, RequestErrors
from brokerd.serving.answer import Answer
from brokerd.serving.answer_order import AnswerOrder, Unanswered
from brokerd.serving.authentication import (
    ANONYMOUS,
    FailedLogins,
    SaslSession,
    StoredUser,
    principal_of_certificate,
)
from brokerd.serving.connection_limits import ConnectionLimits, reap_reason, refusal
from brokerd.serving.connection_state import Phase, PhaseLimits, phase_of
from spark_replica.errors import (
    BrokerResponseError,
    ConfigError,
    ConnectionLostError,
    ProtocolError,
    ReplogError,
    RequestTimedOutError,
    ZooKeeperConnectionError,
)
from spark_replica.tls_sniffing import SniffingServer
from spark_replica.transport import (
    Frame,
    FrameStream,
    OversizedFrame,
    RequestBudget,
    serve_frame_streams,
)
from spark_replica.wire.primitives import Chunk
from spark_replica.zk.security_store import fake_credential_key, read_user_credentials

T = TypeVar("T")
logger = logging.getLogger("brokerd.server")

# api key, api version and correlation id: enough to answer a frame we will not read.
FIXED_HEADER_BYTES = 8
# PBKDF2 checks of SASL/PLAIN passwords running at once; more logins wait their turn.
MAX_CONCURRENT_HASHING = min(4, os.cpu_count() or 1)


@dataclass(eq=False)
class Connection:
    stream: FrameStream
    ip: str
    principal: str = ANONYMOUS
    sasl: SaslSession | None = None  # on a SASL listener, until and after login
    in_flight: int = 0  # requests taken and not yet answered
    closing: bool = False  # its last answer ends it
    answered_at: float = field(default_factory=time.monotonic)
    accepted_at: float = field(default_factory=time.monotonic)

    @property
    def phase(self) -> Phase:
        sasl = self.sasl
        return phase_of(
            self.stream.protocol.plaintext_on_tls,
            sasl is not None,
            sasl is not None and sasl.authenticated,
            self.closing,
        )


class LoginRefused(Exception):
    """A SASL step failed: answer `error`, then close after `close_after_s`."""

    def __init__(self, error: BrokerResponseError, close_after_s: float) -> None:
        super().__init__(str(error))
        self.error = error
        self.close_after_s = close_after_s


class Logins:
    """The SASL exchange as both listeners run it: the same users, the same sessions, one
    record of failures per address."""

    def __init__(self, ctx: BrokerContext, errors: RequestErrors) -> None:
        self.ctx = ctx
        self._errors = errors  # refusals are counted here, the dialects answer them
        security = ctx.config.security
        self._failed = FailedLogins(security.failed_authentication_delay_ms / 1000)
        self._hashing = asyncio.Semaphore(MAX_CONCURRENT_HASHING)
        self._fake_key: bytes | None = None  # read from ZooKeeper once

    def new_session(self) -> SaslSession | None:
        """A connection's SASL state, or None on a listener without SASL."""
        security = self.ctx.config.security
        if not security.uses_sasl:
            return None
        return SaslSession(security, self._stored_user, self._hash)

    async def step(
        self,
        connection: Connection,
        api_key: int,
        work: Callable[[SaslSession], Awaitable[T]],
    ) -> T:
        """Run one SASL step of the connection's session (`work`: its handshake or one
        authenticate, the request `api_key`); a refusal is LoginRefused, with the delay
        failures earn, and counted in the request errors; on success the connection
        takes the authenticated principal."""
        sasl = connection.sasl
        assert sasl is not None
        try:
            response = await work(sasl)
        except BrokerResponseError as exc:
            delay = self._failed.record(connection.ip, time.monotonic())
            logger.warning("authentication from %s failed: %s", connection.ip, exc)
            self._errors.count(api_key, exc.code)
            raise LoginRefused(exc, delay) from exc
        except ReplogError as exc:
            # ZooKeeper could not be asked for the credential: the client may retry.
            logger.warning("cannot authenticate %s now: %s", connection.ip, exc)
            error = RequestTimedOutError(f"cannot look up credentials now: {exc}")
            self._errors.count(api_key, error.code)
            raise LoginRefused(error, 0.0) from exc
        if sasl.principal is not None:
            connection.principal = sasl.principal
        return response

    async def _stored_user(self, username: str) -> StoredUser:
        zk = self.ctx.zk
        if zk is None:
            raise ZooKeeperConnectionError("the broker has no ZooKeeper session yet")

        def read() -> StoredUser:
            if self._fake_key is None:
                self._fake_key = fake_credential_key(zk)
            try:
                credentials = read_user_credentials(zk, username)
            except ConfigError:
                credentials = {}  # a name no znode can have: no such user
            return StoredUser(credentials, self._fake_key)

        return await asyncio.to_thread(read)

    async def _hash(self, work: Callable[[], bool]) -> bool:
        async with self._hashing:
            return await asyncio.to_thread(work)


class Dispatch(Protocol):
    """A listener's dispatch (brokerd/serving/dispatch.py): answers frames, refuses
    oversized ones."""

    logins: Logins

    async def handle(self, connection: Connection, frame: Frame) -> Answer:
        """Answer one frame, or refuse it as its phase requires; raise ProtocolError
        when its header cannot be read (the connection is closed)."""
        ...

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> Sequence[Chunk] | None:
        """What to write before closing a connection that sent a frame over `limit`."""
        ...


class RequestServer:
    def __init__(
        self,
        ctx: BrokerContext,
        host: str,
        port: int,
        max_frame_bytes: int,
        dispatch: Dispatch,
        requests: ListenerRequests,
    ) -> None:
        self.ctx = ctx
        self.requests = requests
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.dispatch = dispatch
        self._server: asyncio.Server | SniffingServer | None = None
        config = ctx.config
        self.phase_limits = PhaseLimits(
            max_frame_bytes,
            config.sasl_server_max_receive_size,
            config.sasl_server_authentication_timeout_ms,
        )
        self.limits = ConnectionLimits(
            config.max_connections,
            config.max_connections_per_ip,
            config.connections_max_idle_ms,
            config.socket_request_read_timeout_ms,
            config.sasl_server_authentication_timeout_ms,
        )
        self.budget = RequestBudget(config.queued_max_request_bytes)
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._open_per_ip: collections.Counter[str] = collections.Counter()
        self._refusing = False  # warn once per run of refusals, not per connection
        self.security = config.security

    async def start(self) -> int:
        """Listen; return the bound port (useful when asked for port 0)."""
        self._server = await serve_frame_streams(
            self.host,
            self.port,
            self.max_frame_bytes,
            FIXED_HEADER_BYTES,
            self._on_stream,
            self.budget,
            self.security.server_ssl_context(),
            self._handshake_timeout_s(),
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.create_task(self._sweep_forever())
        return self.port

    def _handshake_timeout_s(self) -> float:
        """A TLS handshake comes before any login: it gets no longer than a login does."""
        config = self.ctx.config
        return (
            min(config.socket_request_read_timeout_ms, config.sasl_server_authentication_timeout_ms)
            / 1000
        )

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
        connection = Connection(stream, ip)
        if self.security.uses_tls:
            connection.principal = principal_of_certificate(
                stream.transport.get_extra_info("peercert")
            )
        connection.sasl = self.dispatch.logins.new_session()
        self._apply_phase_limits(connection)
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
                connection.in_flight > 0,
                self.phase_limits.login_deadline_s(connection.phase, connection.accepted_at),
            )
            if reason is not None:
                logger.info("closing connection from %s: %s", connection.stream.peer, reason)
                connection.stream.abort()

    async def _serve(self, connection: Connection) -> None:
        stream = connection.stream
        answers = AnswerOrder(stream, partial(self._done, connection))
        try:
            while True:
                await answers.room()
                frame = await stream.read_frame()
                if isinstance(frame, OversizedFrame):
                    await answers.drain()
                    await self._refuse_oversized(stream, frame)
                    return
                arrived = time.monotonic()
                connection.in_flight += 1
                try:
                    answer = await self._answer(connection, frame)
                except BaseException:
                    self._release(connection, frame)
                    raise
                await answers.put(Unanswered(frame, _api_key(frame), arrived, answer))
                if connection.closing:
                    await answers.drain()
                    return
        except (ConnectionLostError, ProtocolError) as exc:
            if isinstance(exc, ProtocolError):
                logger.warning("closing connection from %s: %s", stream.peer, exc)
            # No more requests (the peer closed its side, or sent a frame that cannot be
            # read): the ones already taken are still answered, as far as the line allows.
            with contextlib.suppress(ConnectionLostError):
                await answers.drain()
        finally:
            answers.abandon()
            stream.close()

    def _release(self, connection: Connection, frame: Frame) -> None:
        connection.in_flight -= 1
        connection.answered_at = time.monotonic()
        connection.stream.release(frame)

    def _done(self, connection: Connection, request: Unanswered, written: bool) -> None:
        """A request is answered (or never will be): give its frame back, count it."""
        self._release(connection, request.frame)
        if written:
            self.requests.record(request.api_key, (connection.answered_at - request.arrived) * 1000)

    async def _answer(self, connection: Connection, frame: Frame) -> Answer:
        """The dispatch's answer; a change of phase it brings changes the limits."""
        phase = connection.phase
        answer = await self.dispatch.handle(connection, frame)
        if answer.close_after_s is not None:
            connection.closing = True
        elif connection.phase is not phase:
            self._apply_phase_limits(connection)
        return answer

    def _apply_phase_limits(self, connection: Connection) -> None:
        limit = self.phase_limits.frame_bytes(connection.phase)
        connection.stream.protocol.set_limits(limit, limit)

    async def _refuse_oversized(self, stream: FrameStream, frame: OversizedFrame) -> None:
        limit = stream.protocol.max_frame_bytes
        buffers = self.dispatch.oversized_answer(frame, limit)
        if buffers is not None:
            await stream.write(buffers)
        logger.warning(
            "closing connection from %s: request of %d bytes is over the limit of %d",
            stream.peer,
            frame.size,
            limit,
        )


def _api_key(frame: Frame) -> int:
    """The api key a frame starts with (-1 if it is too short to have one)."""
    return (frame[0] << 8) | frame[1] if len(frame) >= 2 else -1


def _ip_of(peer: object) -> str:
    """The address part of a socket's peer name ("" when the socket has none)."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return ""
