"""Scraping the brokers' /metrics for the console's charts, one round at a time.

Each round asks every live broker with a metrics port at once, each with its own
deadline and a cap on the answer's size, so a paused or chatty broker costs one failed
sample and never stalls the others.

Brokers whose /metrics require HTTPS and a login (their `metrics.*` configs) are scraped
with the console's client properties (--command-config): `metrics.ssl.truststore.location`
(the CA's PEM; scrape over HTTPS) and `metrics.basic.auth.username` and `.password`.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spark_replica.errors import ConfigError, ProtocolError
from spark_replica.tools.console.cluster_view import BrokerView
from spark_replica.tools.console.http import metrics_request, parse_response
from spark_replica.tools.console.rates import RateTracker, Scrape, parse_counters

METRICS_PATH = "/metrics"
SCRAPE_TIMEOUT_S = 2.0
# A broker with thousands of partitions serves a few MB; anything past this is refused.
MAX_METRICS_BYTES = 32 * 1024 * 1024


TRUSTSTORE_KEY = "metrics.ssl.truststore.location"
USERNAME_KEY = "metrics.basic.auth.username"
PASSWORD_KEY = "metrics.basic.auth.password"


@dataclass(frozen=True)
class ScrapeSettings:
    """How the console reaches the brokers' /metrics: HTTPS or not, and its login."""

    ssl_context: ssl.SSLContext | None = None
    authorization: str | None = field(default=None, repr=False)  # an Authorization value

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ScrapeSettings:
        username, password = props.get(USERNAME_KEY), props.get(PASSWORD_KEY)
        if (username is None) != (password is None):
            raise ConfigError(f"give both {USERNAME_KEY} and {PASSWORD_KEY}, or neither")
        authorization = None
        if username is not None and password is not None:
            login = f"{username.strip()}:{password}".encode()
            authorization = "Basic " + base64.b64encode(login).decode("ascii")
        truststore = props.get(TRUSTSTORE_KEY, "").strip()
        if not truststore:
            if authorization is not None:
                raise ConfigError(f"{USERNAME_KEY} needs {TRUSTSTORE_KEY}: logins go over HTTPS")
            return cls()
        try:
            context = ssl.create_default_context(cafile=str(Path(truststore)))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{TRUSTSTORE_KEY}: cannot load {truststore}: {exc}") from exc
        return cls(context, authorization)


async def fetch_metrics(
    host: str,
    port: int,
    timeout_s: float = SCRAPE_TIMEOUT_S,
    settings: ScrapeSettings | None = None,
) -> str:
    """The text of http(s)://host:port/metrics; ProtocolError or OSError/TimeoutError if not."""
    settings = ScrapeSettings() if settings is None else settings

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection(host, port, ssl=settings.ssl_context)
        try:
            writer.write(metrics_request(host, port, METRICS_PATH, settings.authorization))
            await writer.drain()
            data = await reader.read(MAX_METRICS_BYTES + 1)
            while data and len(data) <= MAX_METRICS_BYTES:
                more = await reader.read(MAX_METRICS_BYTES + 1 - len(data))
                if not more:
                    break
                data += more
            return data
        finally:
            writer.close()

    data = await asyncio.wait_for(exchange(), timeout_s)
    if len(data) > MAX_METRICS_BYTES:
        raise ProtocolError(f"metrics answer over {MAX_METRICS_BYTES} bytes")
    status, body = parse_response(data)
    if status != 200:
        raise ProtocolError(f"metrics answered HTTP {status}")
    return body.decode("utf-8", errors="replace")


async def scrape_one(broker: BrokerView, settings: ScrapeSettings) -> Scrape | str:
    """A broker's counters now, or in words why not."""
    try:
        text = await fetch_metrics(
            broker.metrics_address, broker.metrics_port, SCRAPE_TIMEOUT_S, settings
        )
        return Scrape(time.monotonic(), parse_counters(text))
    except (OSError, TimeoutError, ProtocolError, ssl.SSLError) as exc:
        return f"{broker.metrics_url}: {str(exc) or type(exc).__name__}"


async def scrape_round(
    brokers: list[BrokerView], tracker: RateTracker, settings: ScrapeSettings | None = None
) -> dict[int, Scrape | str]:
    """Scrape every broker that serves metrics and record the round in `tracker`; each
    scraped broker's Scrape, or why it failed."""
    settings = ScrapeSettings() if settings is None else settings
    serving = [b for b in brokers if b.metrics_port >= 0]
    results = await asyncio.gather(*(scrape_one(b, settings) for b in serving))
    scrapes = dict(zip((b.broker_id for b in serving), results, strict=True))
    tracker.record(time.time() * 1000, scrapes)
    return scrapes
