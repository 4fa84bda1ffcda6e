"""GET /metrics over HTTP/1.x, served on the broker's own event loop.

The broker's state is owned by its loop, so the scrape runs there too: the collectors
read partitions and the controller's model without locks, and no thread is added.
This is all the HTTP a scraper needs, and no more: one request per connection, whose
head must arrive within READ_TIMEOUT_S and fit in MAX_REQUEST_BYTES (a body, if sent,
is ignored); the answer carries `Connection: close` and the connection is closed.
Anything but GET /metrics is refused with its status code (404, 405, 400, 431).

With `metrics.*` configs (access.py) the endpoint serves HTTPS only, and a request
without the configured basic-authentication credentials gets 401 whatever it asks for.

Parsing and answering are pure functions (`answer_for`, on spark_replica/http_head.py,
which the console shares), apart from the small shell that reads and writes the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from http import HTTPStatus

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from brokerd.metrics.access import REALM, MetricsAccess
from spark_replica.http_head import RequestLine, encode_response, header_value, parse_request_line

logger = logging.getLogger("brokerd.metrics")

METRICS_PATH = "/metrics"
MAX_REQUEST_BYTES = 8 * 1024
READ_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 10.0
TEXT = "text/plain; charset=utf-8"


def answer_for(
    request: RequestLine | None, registry: CollectorRegistry, authorized: bool = True
) -> bytes:
    """The whole answer to one request head (`authorized`: it passed the access check)."""
    if request is None:
        return encode_response(HTTPStatus.BAD_REQUEST, TEXT, b"not an HTTP/1.x request\n")
    if not authorized:
        return encode_response(
            HTTPStatus.UNAUTHORIZED,
            TEXT,
            b"basic authentication required\n",
            [f'WWW-Authenticate: Basic realm="{REALM}", charset="UTF-8"'],
        )
    if request.path != METRICS_PATH:
        body = f"only {METRICS_PATH} is served here\n".encode()
        return encode_response(HTTPStatus.NOT_FOUND, TEXT, body)
    if request.method != "GET":
        return encode_response(HTTPStatus.METHOD_NOT_ALLOWED, TEXT, b"use GET\n", ["Allow: GET"])
    return encode_response(HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(registry))


class MetricsServer:
    """Owned by the broker's event loop."""

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        access: MetricsAccess | None = None,
    ) -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self._access = MetricsAccess() if access is None else access
        # Built here, so that a bad keystore fails the broker's start.
        self._ssl = self._access.ssl_context()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        """Listen; return the bound port (useful when asked for port 0)."""
        self._server = await asyncio.start_server(
            self._serve,
            self._host,
            self._port,
            limit=MAX_REQUEST_BYTES,
            ssl=self._ssl,
            ssl_handshake_timeout=READ_TIMEOUT_S if self._ssl is not None else None,
        )
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except asyncio.LimitOverrunError:
                writer.write(
                    encode_response(
                        HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                        TEXT,
                        f"a request head is at most {MAX_REQUEST_BYTES} bytes\n".encode(),
                    )
                )
            else:
                authorized = self._access.authorized(header_value(head, "authorization"))
                writer.write(answer_for(parse_request_line(head), self._registry, authorized))
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ssl.SSLError):
            pass  # the scraper went away or stalled: nothing to answer
        except Exception:
            logger.exception("answering a metrics request failed")
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
