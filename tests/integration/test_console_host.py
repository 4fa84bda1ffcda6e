"""`replog console` answers only requests that name it (DNS rebinding): localhost, an
address, or a name given with --allow-host. Before, any Host was served."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

from spark_replica.console.http import parse_response
from tests.support import running_console

pytestmark = pytest.mark.slow


def status_for(url: str, host: str) -> int:
    address = urlsplit(url)
    with socket.create_connection((address.hostname or "", address.port or 0), 10) as sock:
        sock.sendall(f"GET /api/cluster HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return parse_response(data)[0]


def test_the_console_refuses_hosts_it_was_not_given() -> None:
    with running_console("--bootstrap", "127.0.0.1:9", "--allow-host", "console.example") as url:
        assert status_for(url, "rebound.example:8080") == 421
        assert status_for(url, "console.example:8080") == 200
        assert status_for(url, "localhost") == 200
