"""Produce and consume rates from two scrapes of the brokers' Prometheus counters.

Pure: scrapes go in as text with the (monotonic) time they were taken, rates come out.
A rate is a counter's increase between a broker's last two scrapes over the time between
them, as Prometheus's rate() reads it: a counter lower than before means the broker
restarted and counted from zero, so its whole value is the increase; a topic the earlier
scrape did not have started from zero too. A broker whose scrape failed keeps its last
good one, and its next good scrape averages over the gap. The cluster's rate is the sum
over the brokers that have two scrapes.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from spark_replica.errors import ProtocolError

# The chart series and the broker counters they come from (names as in Kafka's
# BrokerTopicMetrics MBeans, lower-cased and underscored, with one label: topic).
SERIES = {
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
}
SERIES_OF_SAMPLE = {sample: series for series, sample in SERIES.items()}
# Two minutes of points at one scrape a second.
DEFAULT_HISTORY_POINTS = 120

# (series, topic) -> a counter's value or a rate per second
Counters = dict[tuple[str, str], float]


def parse_counters(text: str) -> Counters:
    """The SERIES counters of one /metrics page, per topic; ProtocolError if unreadable."""
    counters: Counters = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                series = SERIES_OF_SAMPLE.get(sample.name)
                if series is not None:
                    topic = sample.labels.get("topic", "")
                    counters[(series, topic)] = counters.get((series, topic), 0.0) + sample.value
    except (ValueError, TypeError, IndexError) as exc:
        raise ProtocolError(f"metrics are not Prometheus text: {exc}") from exc
    return counters


@dataclass(frozen=True)
class Scrape:
    at: float  # monotonic seconds
    counters: Counters


def increase(earlier: float, later: float) -> float:
    return later if later < earlier else later - earlier


def rates_between(earlier: Scrape, later: Scrape) -> Counters:
    """Per second, each counter's increase from one scrape of a broker to the next."""
    elapsed = later.at - earlier.at
    if elapsed <= 0:
        return {}
    return {
        key: increase(earlier.counters.get(key, 0.0), value) / elapsed
        for key, value in later.counters.items()
    }


class RateTracker:
    """The latest rates per broker and per topic, and a history of the cluster's totals.

    Owned by the console's scrape loop; readers take `as_json()`.
    """

    def __init__(self, history_points: int = DEFAULT_HISTORY_POINTS) -> None:
        self._last: dict[int, Scrape] = {}
        self._points: deque[dict[str, float]] = deque(maxlen=history_points)
        self._by_broker: dict[int, dict[str, float]] = {}
        self._by_topic: dict[str, dict[str, float]] = {}
        self._errors: dict[int, str] = {}

    def record(self, wall_ms: float, scrapes: dict[int, Scrape | str]) -> None:
        """One round of scrapes (a Scrape, or why it failed) per broker, taken at wall_ms.

        Adds a history point once some broker has two scrapes to compare.
        """
        self._errors = {b: s for b, s in scrapes.items() if isinstance(s, str)}
        by_broker: dict[int, dict[str, float]] = {}
        by_topic: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(SERIES, 0.0))
        for broker_id, scrape in scrapes.items():
            if isinstance(scrape, str):
                continue
            earlier = self._last.get(broker_id)
            self._last[broker_id] = scrape
            if earlier is None:
                continue
            totals = dict.fromkeys(SERIES, 0.0)
            for (series, topic), rate in rates_between(earlier, scrape).items():
                totals[series] += rate
                by_topic[topic][series] += rate
            by_broker[broker_id] = totals
        for gone in set(self._last) - set(scrapes):
            del self._last[gone]
        self._by_broker = by_broker
        self._by_topic = dict(by_topic)
        if by_broker:
            point = {"t": wall_ms}
            for series in SERIES:
                point[series] = sum(totals[series] for totals in by_broker.values())
            self._points.append(point)

    def as_json(self) -> dict[str, object]:
        return {
            "series": list(SERIES),
            "points": list(self._points),
            "brokers": {str(b): rates for b, rates in sorted(self._by_broker.items())},
            "topics": dict(sorted(self._by_topic.items())),
            "errors": {str(b): error for b, error in sorted(self._errors.items())},
        }
