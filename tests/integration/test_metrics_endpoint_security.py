"""A broker's /metrics behind TLS and basic authentication (metrics.* configs).

Before, the endpoint served every scraper in plaintext with no login, and the configs
did not exist. Now, with them set, plain HTTP gets no answer, a request without the
credentials (or with wrong ones) gets 401, and Prometheus-style basic authentication
over HTTPS gets the metrics; `replog console` scrapes them with the same login from its
--command-config. The console itself answers only requests naming it (DNS rebinding):
localhost, an address, or a name given with --allow-host; before, any Host was served.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from spark_replica.security.certs import issue_server_cert, make_ca
from spark_replica.tools.console.http import parse_response
from tests.support import BrokerFactory, http_get, running_console

pytestmark = pytest.mark.slow

USER, PASSWORD = "prometheus", "scrape-me"
TIMEOUT_S = 10.0
CONSOLE_DEADLINE_S = 30.0


def scrape(port: int, context: ssl.SSLContext, credentials: str | None) -> tuple[int, bytes]:
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=TIMEOUT_S, context=context)
    headers = {}
    if credentials is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
    try:
        connection.request("GET", "/metrics", headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def console_status(url: str, host: str) -> int:
    """The console's answer to a request naming `host` in its Host header."""
    address = urlsplit(url)
    with socket.create_connection((address.hostname or "", address.port or 0), TIMEOUT_S) as sock:
        sock.sendall(f"GET /api/cluster HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return parse_response(data)[0]


def test_metrics_need_tls_and_the_configured_login(brokers: BrokerFactory, tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    keystore = issue_server_cert(ca, tmp_path / "metrics.pem")
    broker = brokers.start(
        1,
        **{
            "metrics.ssl.keystore.location": str(keystore),
            "metrics.basic.auth.username": USER,
            "metrics.basic.auth.password": PASSWORD,
        },
    )
    context = ssl.create_default_context(cafile=str(ca.cert))

    plain = http.client.HTTPConnection("127.0.0.1", broker.metrics_port, timeout=TIMEOUT_S)
    try:
        with pytest.raises((http.client.HTTPException, OSError)):
            plain.request("GET", "/metrics")
            plain.getresponse().read()
    finally:
        plain.close()

    for credentials in (None, f"{USER}:wrong", f"someone:{PASSWORD}"):
        status, _ = scrape(broker.metrics_port, context, credentials)
        assert status == 401, credentials
    status, body = scrape(broker.metrics_port, context, f"{USER}:{PASSWORD}")
    assert status == 200
    assert b"kafka_server_replicamanager_underreplicatedpartitions" in body

    console_properties = tmp_path / "console.properties"
    console_properties.write_text(
        f"metrics.ssl.truststore.location={ca.cert}\n"
        f"metrics.basic.auth.username={USER}\n"
        f"metrics.basic.auth.password={PASSWORD}\n"
    )
    with running_console(
        "--zookeeper",
        brokers.zk_connect,
        "--command-config",
        str(console_properties),
        "--allow-host",
        "console.example",
    ) as url:
        assert console_status(url, "rebound.example:8080") == 421, "DNS rebinding"
        assert console_status(url, "console.example:8080") == 200
        deadline = time.monotonic() + CONSOLE_DEADLINE_S
        while True:
            rates = json.loads(http_get(url, "/api/rates")[2])
            if rates["points"]:
                break
            assert time.monotonic() < deadline, f"the console scraped nothing: {rates}"
            time.sleep(0.3)
        assert rates["available"] is True
        assert rates["errors"] == {}
