"""A TLS listener that tells a TLS client from one speaking plaintext by its first byte.

A client that speaks plaintext to a TLS listener would otherwise see its connection
closed and retry for a minute; told apart, it gets an answer that says what is wrong
(spark_replica/transport.py marks its stream `plaintext_on_tls`). The first byte of
every TLS connection is a handshake record (0x16); no request frame starts with it.

The listener accepts connections itself rather than through loop.create_server: a byte
must be looked at before anything reads the socket, and an event loop's transport may
read as soon as it exists (uvloop's does, even when paused in connection_made). An
accepted socket no transport owns yet is peeked at (MSG_PEEK: nothing is consumed),
then handed to the loop with loop.connect_accepted_socket, with TLS or without. Works
the same on asyncio's loop and on uvloop, whose TLS is about twice as fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

logger = logging.getLogger("replog.transport")

TLS_HANDSHAKE_RECORD = 0x16
# Connections accepted and waiting to be taken up, as asyncio's create_server allows.
BACKLOG = 100

NewProtocol = Callable[[bool], asyncio.BaseProtocol]  # plaintext_on_tls -> protocol


class SniffingServer:
    """The listening sockets and their accepting tasks; what asyncio.Server offers the
    broker (its sockets, close, wait_closed)."""

    def __init__(
        self,
        listeners: list[socket.socket],
        new_protocol: NewProtocol,
        context: ssl.SSLContext,
        timeout_s: float,
    ) -> None:
        self.sockets = listeners
        self._new_protocol = new_protocol
        self._context = context
        self._timeout_s = timeout_s
        self._routing: set[asyncio.Task[None]] = set()
        self._accepting = [asyncio.create_task(self._accept(listener)) for listener in listeners]

    def close(self) -> None:
        """Stop accepting; connections being looked at are dropped, established ones
        are their owners' to close."""
        for task in [*self._accepting, *self._routing]:
            task.cancel()
        for listener in self.sockets:
            listener.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._accepting, *self._routing, return_exceptions=True)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, _ = await loop.sock_accept(listener)
            except OSError as exc:
                # Out of descriptors, or a connection reset before it was taken: go on.
                logger.warning("cannot accept a connection: %s", exc)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.create_task(self._route(connection))
            self._routing.add(task)
            task.add_done_callback(self._routing.discard)

    async def _route(self, connection: socket.socket) -> None:
        """TLS for a TLS client, a marked plain protocol for any other; closed if it
        sends nothing within the handshake timeout."""
        loop = asyncio.get_running_loop()
        connection.setblocking(False)
        try:
            first = await asyncio.wait_for(_peek_first_byte(connection), self._timeout_s)
            if first is None:
                connection.close()
                return
            if first != TLS_HANDSHAKE_RECORD:
                await loop.connect_accepted_socket(lambda: self._new_protocol(True), connection)
                return
            await loop.connect_accepted_socket(
                lambda: self._new_protocol(False),
                connection,
                ssl=self._context,
                ssl_handshake_timeout=self._timeout_s,
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError):
            connection.close()
        except asyncio.CancelledError:
            connection.close()
            raise


async def serve_sniffing_tls(
    host: str, port: int, new_protocol: NewProtocol, context: ssl.SSLContext, timeout_s: float
) -> SniffingServer:
    """Listen on every address `host` resolves to; OSError if one cannot be bound (its
    message says "address already in use" when the port is taken, as asyncio's does)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    listeners: list[socket.socket] = []
    try:
        for family, kind, protocol, _, address in dict.fromkeys(infos):
            listener = socket.socket(family, kind, protocol)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                listener.bind(address)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {address!r}: {exc}"
                ) from None
            listener.listen(BACKLOG)
            listener.setblocking(False)
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    return SniffingServer(listeners, new_protocol, context, timeout_s)


async def _peek_first_byte(connection: socket.socket) -> int | None:
    """The connection's first byte, left unread (None if the peer closed first)."""
    loop = asyncio.get_running_loop()
    while True:
        with contextlib.suppress(BlockingIOError):
            data = connection.recv(1, socket.MSG_PEEK)
            return data[0] if data else None
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(connection.fileno(), _wake, readable)
        try:
            await readable
        finally:
            loop.remove_reader(connection.fileno())


def _wake(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)
