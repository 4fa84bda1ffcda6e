"""Scraping the brokers' /metrics for the console's charts, one round at a time.

Each round asks every live broker with a metrics port at once, each with its own
deadline and a cap on the answer's size, so a paused or chatty broker costs one failed
sample and never stalls the others.
"""

from __future__ import annotations

import asyncio
import time

from spark_replica.console.cluster_view import BrokerView
from spark_replica.console.http import metrics_request, parse_response
from spark_replica.console.rates import RateTracker, Scrape, parse_counters
from spark_replica.errors import ProtocolError

METRICS_PATH = "/metrics"
SCRAPE_TIMEOUT_S = 2.0
# A broker with thousands of partitions serves a few MB; anything past this is refused.
MAX_METRICS_BYTES = 32 * 1024 * 1024


async def fetch_metrics(host: str, port: int, timeout_s: float = SCRAPE_TIMEOUT_S) -> str:
    """The text of http://host:port/metrics; ProtocolError or OSError/TimeoutError if not."""

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(metrics_request(host, port, METRICS_PATH))
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


async def scrape_one(broker: BrokerView) -> Scrape | str:
    """A broker's counters now, or in words why not."""
    try:
        text = await fetch_metrics(broker.metrics_address, broker.metrics_port)
        return Scrape(time.monotonic(), parse_counters(text))
    except (OSError, TimeoutError, ProtocolError) as exc:
        return f"{broker.metrics_url}: {str(exc) or type(exc).__name__}"


async def scrape_round(brokers: list[BrokerView], tracker: RateTracker) -> None:
    """Scrape every broker that serves metrics and record the round in `tracker`."""
    serving = [b for b in brokers if b.metrics_port >= 0]
    results = await asyncio.gather(*(scrape_one(b) for b in serving))
    tracker.record(
        time.time() * 1000, dict(zip((b.broker_id for b in serving), results, strict=True))
    )
