"""The console: loops that keep the latest cluster, rates, lag and groups documents, and
its routes.

Four loops each refresh one document every interval: the cluster (registrations, topics
and their configs), the rates (one scrape round of the brokers that were live at the
last cluster read), the lag of the given checkpoints and the Kafka consumer groups.
Requests only read the latest documents, so any number of open pages cost the cluster
nothing more, and no route changes anything.

Every JSON answer also says, per panel, when its data was read and whether it is stale
(freshness.py), worked out when the answer is made: a refresh that hangs ages its panel
even though no read failed.

Owned by the console's event loop: the loops write `documents` and the freshness of
each panel, routes read them.
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
from spark_replica.errors import ReplogError
from spark_replica.tools.console.cluster_source import (
    BROKERS_UNREACHABLE,
    READ_TIMEOUT_S,
    ClusterSource,
    now_ms,
)
from spark_replica.tools.console.cluster_view import cluster_json
from spark_replica.tools.console.error_lines import collapse_error
from spark_replica.tools.console.freshness import Freshness
from spark_replica.tools.console.group_source import GROUPS_TIMEOUT_S, read_groups
from spark_replica.tools.console.http import Request, Response, error_response
from spark_replica.tools.console.lag import lag_json
from spark_replica.tools.console.rates import RateTracker, Scrape
from spark_replica.tools.console.record_source import RecordsNotFoundError, read_page
from spark_replica.tools.console.record_view import RecordQueryError, parse_query
from spark_replica.tools.console.scrape import SCRAPE_TIMEOUT_S, ScrapeSettings, scrape_round

DEFAULT_INTERVAL_S = 1.0
# Lag asks every partition's leader for its HW: half as often as the rest.
LAG_INTERVAL_FACTOR = 2
# One read of the cluster that takes longer is abandoned and tried again next round.
REFRESH_TIMEOUT_S = 15.0
RECORDS_PATH = "/api/records"
# One page of records: the topic check, three offset lookups and the read.
RECORDS_TIMEOUT_S = 20.0
# A panel whose data is older than this many rounds plus a read's deadline is stale.
STALE_AFTER_ROUNDS = 3
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
NO_KAFKA_ADDRESSES = (
    "consumer groups unavailable: they are read from the brokers' Kafka listeners, named in "
    "their ZooKeeper registrations; start the console with --dir or --zookeeper"
)
NO_KAFKA_LISTENER = "consumer groups unavailable: no live broker runs a Kafka listener"
KAFKA_UNREACHABLE = "Kafka listeners unreachable"


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


def json_error(status: HTTPStatus, message: str) -> Response:
    body = json.dumps({"status": int(status), "error": message}, separators=(",", ":"))
    return Response(status, "application/json", body.encode())


def stamped(document: dict[str, object]) -> dict[str, object]:
    return {**document, "updated_ms": int(time.time() * 1000)}


def max_age_ms(interval_s: float, read_timeout_s: float) -> int:
    return int((STALE_AFTER_ROUNDS * interval_s + read_timeout_s) * 1000)


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
        self.rates_freshness = Freshness()
        self.broker_metrics: dict[int, Freshness] = {}
        self.lag_freshness = Freshness()
        self.groups_freshness = Freshness()
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
            "/api/groups": stamped(
                {"available": False, "reason": waiting, "groups": [], "total": 0}
            ),
        }

    async def answer(self, request: Request) -> Response:
        """The answer to a request: a page of records is read for it, the rest is kept."""
        if request.path == RECORDS_PATH:
            return await self.records(request.params)
        return self.route(request.path)

    async def records(self, params: dict[str, str]) -> Response:
        """A page of a partition's records, or a JSON error saying what went wrong."""
        try:
            query = parse_query(params)
            page = await asyncio.wait_for(read_page(self.cluster, query), RECORDS_TIMEOUT_S)
        except RecordsNotFoundError as exc:
            return json_error(HTTPStatus.NOT_FOUND, str(exc))
        except RecordQueryError as exc:
            return json_error(HTTPStatus.BAD_REQUEST, str(exc))
        except TimeoutError:
            message = f"the brokers did not answer in {RECORDS_TIMEOUT_S:g} s"
            return json_error(HTTPStatus.GATEWAY_TIMEOUT, message)
        except ReplogError as exc:
            message = f"{BROKERS_UNREACHABLE}: {collapse_error(str(exc) or type(exc).__name__)}"
            return json_error(HTTPStatus.SERVICE_UNAVAILABLE, message)
        return json_response(page)

    def route(self, path: str) -> Response:
        static = self.static.get(path)
        if static is not None:
            return static
        document = self.documents.get(path)
        if document is not None:
            return json_response({**document, **self.freshness_of(path, now_ms())})
        return error_response(HTTPStatus.NOT_FOUND, f"no such page {path!r}")

    def freshness_of(self, path: str, now: int) -> dict[str, object]:
        """The `panels` of the document at `path` (and, for the rates, of each broker's
        metrics), as of `now`."""
        cluster_age = max_age_ms(self.interval_s, READ_TIMEOUT_S)
        if path == "/api/cluster":
            panels = {
                "brokers": self.source.brokers_freshness.as_json(now, cluster_age),
                "topics": self.source.topics_freshness.as_json(now, cluster_age),
            }
            return {"panels": panels}
        if path == "/api/rates":
            rates_age = max_age_ms(self.interval_s, SCRAPE_TIMEOUT_S)
            return {
                "panels": {"rates": self.rates_freshness.as_json(now, rates_age)},
                "broker_metrics": {
                    str(b): f.as_json(now, rates_age)
                    for b, f in sorted(self.broker_metrics.items())
                },
            }
        slow_age = max_age_ms(self.interval_s * LAG_INTERVAL_FACTOR, REFRESH_TIMEOUT_S)
        if path == "/api/groups":
            return {"panels": {"groups": self.groups_freshness.as_json(now, slow_age)}}
        return {"panels": {"lag": self.lag_freshness.as_json(now, slow_age)}}

    async def refresh_cluster(self) -> None:
        self.documents["/api/cluster"] = stamped(await self.source.snapshot())

    async def refresh_rates(self) -> None:
        if self.source.zk is None:
            reason: str | None = NO_ZOOKEEPER
        elif not any(b.metrics_port >= 0 for b in self.source.live):
            reason = NO_METRICS_PORT
        else:
            reason = None
            self.record_scrapes(await scrape_round(self.source.live, self.tracker, self.scrape))
        brokers = self.source.brokers_freshness
        if reason is not None and brokers.failing_since_ms is not None:
            # Which brokers to scrape is as stale as the last read of the registrations.
            self.rates_freshness.failed(now_ms(), brokers.reason or "", brokers.detail)
        elif reason is not None:
            # "Unavailable, and why" is itself a fresh answer.
            self.rates_freshness.succeeded(now_ms())
        document = {**self.tracker.as_json(), "available": reason is None, "reason": reason}
        self.documents["/api/rates"] = stamped(document)

    def record_scrapes(self, scrapes: dict[int, Scrape | str]) -> None:
        """Each scraped broker's metrics are fresh or not; the rates are while any is."""
        now = now_ms()
        for broker_id, scrape in scrapes.items():
            freshness = self.broker_metrics.setdefault(broker_id, Freshness())
            if isinstance(scrape, str):
                freshness.failed(now, f"broker {broker_id} unreachable", scrape)
            else:
                freshness.succeeded(now)
        failed = sorted(b for b, s in scrapes.items() if isinstance(s, str))
        if scrapes and len(failed) == len(scrapes):
            names = ", ".join(map(str, failed))
            detail = "; ".join(str(scrapes[b]) for b in failed)
            self.rates_freshness.failed(
                now, f"broker{'s' if len(failed) > 1 else ''} {names} unreachable", detail
            )
        else:
            self.rates_freshness.succeeded(now)

    async def refresh_lag(self) -> None:
        self.documents["/api/lag"] = stamped(await lag_json(self.cluster, self.checkpoints))
        self.lag_freshness.succeeded(now_ms())

    async def refresh_groups(self) -> None:
        if self.source.zk is None:
            reason: str | None = NO_KAFKA_ADDRESSES
        elif not any(b.kafka_port >= 0 for b in self.source.live):
            reason = NO_KAFKA_LISTENER
        else:
            reason = None
        if reason is not None:
            document = {"available": False, "reason": reason, "groups": [], "total": 0}
            self.documents["/api/groups"] = stamped(document)
            self.groups_freshness.succeeded(now_ms())
            return
        bootstrap = [(b.kafka_host or b.host, b.kafka_port) for b in self.source.live]
        try:
            groups = await asyncio.wait_for(
                read_groups(bootstrap, self.cluster.security), GROUPS_TIMEOUT_S * 2
            )
        except TimeoutError:
            self.groups_freshness.failed(
                now_ms(), KAFKA_UNREACHABLE, f"no answer in {GROUPS_TIMEOUT_S * 2:g} s"
            )
            return
        except ReplogError as exc:
            self.groups_freshness.failed(now_ms(), KAFKA_UNREACHABLE, collapse_error(str(exc)))
            return
        self.documents["/api/groups"] = stamped({"available": True, "reason": None, **groups})
        self.groups_freshness.succeeded(now_ms())

    async def run(self) -> None:
        """Refresh every document forever (until cancelled)."""
        await asyncio.gather(
            self._every(self.interval_s, self.refresh_cluster),
            self._every(self.interval_s, self.refresh_rates),
            self._every(self.interval_s * LAG_INTERVAL_FACTOR, self.refresh_lag),
            self._every(self.interval_s * LAG_INTERVAL_FACTOR, self.refresh_groups),
        )

    @staticmethod
    async def _every(interval_s: float, refresh: Callable[[], Awaitable[None]]) -> None:
        while True:
            # On a timeout the last document stays; its updated_ms shows its age.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(refresh(), REFRESH_TIMEOUT_S)
            await asyncio.sleep(interval_s)
