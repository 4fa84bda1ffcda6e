"""The console: loops that keep the latest cluster, rates and lag documents, and its routes.

Three loops each refresh one document every interval: the cluster (registrations and
topics), the rates (one scrape round of the brokers that were live at the last cluster
read) and the lag of the given checkpoints. Requests only read the latest documents, so
any number of open pages cost the cluster nothing more, and no route changes anything.

Owned by the console's event loop: the loops write `documents`, routes read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from importlib import resources
from pathlib import Path

from spark_replica.client import Cluster
from spark_replica.tools.console.cluster_source import ClusterSource
from spark_replica.tools.console.cluster_view import cluster_json
from spark_replica.tools.console.http import Response, error_response
from spark_replica.tools.console.lag import lag_json
from spark_replica.tools.console.rates import RateTracker
from spark_replica.tools.console.scrape import ScrapeSettings, scrape_round

DEFAULT_INTERVAL_S = 1.0
# Lag asks every partition's leader for its HW: half as often as the rest.
LAG_INTERVAL_FACTOR = 2
# One read of the cluster that takes longer is abandoned and tried again next round.
REFRESH_TIMEOUT_S = 15.0
STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
}
NO_ZOOKEEPER = (
    "metrics unavailable: the brokers' metrics ports are in their ZooKeeper registrations; "
    "start the console with --dir or --zookeeper instead of --bootstrap"
)
NO_METRICS_PORT = "metrics unavailable: no live broker serves metrics (--metrics-port)"


def load_static() -> dict[str, Response]:
    folder = resources.files("spark_replica.tools.console") / "static"
    return {
        path: Response(HTTPStatus.OK, content_type, (folder / name).read_bytes())
        for path, (name, content_type) in STATIC_FILES.items()
    }


def json_response(document: object) -> Response:
    return Response(
        HTTPStatus.OK, "application/json", json.dumps(document, separators=(",", ":")).encode()
    )


def stamped(document: dict[str, object]) -> dict[str, object]:
    return {**document, "updated_ms": int(time.time() * 1000)}


class Console:
    def __init__(
        self,
        source: ClusterSource,
        checkpoints: list[Path],
        interval_s: float = DEFAULT_INTERVAL_S,
        scrape: ScrapeSettings | None = None,
    ) -> None:
        self.source = source
        self.scrape = ScrapeSettings() if scrape is None else scrape
        self.cluster: Cluster = source.cluster
        self.checkpoints = checkpoints
        self.interval_s = interval_s
        self.tracker = RateTracker()
        self.static = load_static()
        waiting = "not read yet"
        self.documents: dict[str, dict[str, object]] = {
            "/api/cluster": stamped(
                cluster_json(
                    source=source.source,
                    live=[],
                    known={},
                    controller=None,
                    topics={},
                    error=waiting,
                )
            ),
            "/api/rates": stamped(
                {**self.tracker.as_json(), "available": False, "reason": waiting}
            ),
            "/api/lag": stamped(
                {"queries": [{"checkpoint": str(c), "error": waiting} for c in checkpoints]}
            ),
        }

    def route(self, path: str) -> Response:
        static = self.static.get(path)
        if static is not None:
            return static
        document = self.documents.get(path)
        if document is not None:
            return json_response(document)
        return error_response(HTTPStatus.NOT_FOUND, f"no such page {path!r}")

    async def refresh_cluster(self) -> None:
        self.documents["/api/cluster"] = stamped(await self.source.snapshot())

    async def refresh_rates(self) -> None:
        if self.source.zk is None:
            reason: str | None = NO_ZOOKEEPER
        elif not any(b.metrics_port >= 0 for b in self.source.live):
            reason = NO_METRICS_PORT
        else:
            reason = None
            await scrape_round(self.source.live, self.tracker, self.scrape)
        document = {**self.tracker.as_json(), "available": reason is None, "reason": reason}
        self.documents["/api/rates"] = stamped(document)

    async def refresh_lag(self) -> None:
        self.documents["/api/lag"] = stamped(await lag_json(self.cluster, self.checkpoints))

    async def run(self) -> None:
        """Refresh every document forever (until cancelled)."""
        await asyncio.gather(
            self._every(self.interval_s, self.refresh_cluster),
            self._every(self.interval_s, self.refresh_rates),
            self._every(self.interval_s * LAG_INTERVAL_FACTOR, self.refresh_lag),
        )

    @staticmethod
    async def _every(interval_s: float, refresh: Callable[[], Awaitable[None]]) -> None:
        while True:
            # On a timeout the last document stays; its updated_ms shows its age.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(refresh(), REFRESH_TIMEOUT_S)
            await asyncio.sleep(interval_s)
