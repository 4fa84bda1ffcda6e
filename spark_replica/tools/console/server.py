"""Serving the console over asyncio streams: one request per connection, bounded.

A request's head must arrive within REQUEST_TIMEOUT_S and fit in MAX_HEAD_BYTES, and at
most MAX_CONNECTIONS are served at once (more are closed at once), so a slow or hostile
client holds nothing for long. Every answer closes its connection. A request whose Host
header names another site is refused (DNS rebinding; http.py's `check_host`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from http import HTTPStatus

from spark_replica.tools.console.app import Console
from spark_replica.tools.console.http import (
    HEAD_END,
    MAX_HEAD_BYTES,
    HttpRequestError,
    Response,
    allowed_hosts,
    check_host,
    error_response,
    parse_request_head,
)

REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64


class ConsoleServer:
    def __init__(self, console: Console, allow_hosts: Iterable[str] = ()) -> None:
        self.console = console
        self.connections = 0
        self._allow_hosts = tuple(allow_hosts)
        self.allowed_hosts = allowed_hosts("", self._allow_hosts)

    async def start(self, host: str, port: int) -> asyncio.Server:
        self.allowed_hosts = allowed_hosts(host, self._allow_hosts)
        return await asyncio.start_server(self.handle, host, port, limit=MAX_HEAD_BYTES)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            writer.close()
            return
        self.connections += 1
        try:
            answer = await self._answer(reader)
            if answer is not None:
                writer.write(answer)
                await asyncio.wait_for(writer.drain(), REQUEST_TIMEOUT_S)
        except (ConnectionError, TimeoutError):
            pass  # the client went away or stopped reading: nothing to tell it
        finally:
            self.connections -= 1
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> bytes | None:
        """The bytes to send back, None when the client sent no whole request."""
        try:
            head = await asyncio.wait_for(reader.readuntil(HEAD_END), REQUEST_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            status = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
            return error_response(status, f"request head over {MAX_HEAD_BYTES} bytes").encode()
        except (asyncio.IncompleteReadError, TimeoutError):
            return None
        try:
            request = parse_request_head(head)
            check_host(request, self.allowed_hosts)
        except HttpRequestError as exc:
            return error_response(exc.status, str(exc)).encode()
        response: Response = await self.console.answer(request)
        return response.encode(head_only=request.method == "HEAD")
