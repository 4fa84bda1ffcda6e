"""A broker's event metrics: counts and latencies added to where things happen.

One BrokerMetrics per broker, with its own CollectorRegistry (never the process-wide
default, so that brokers built in one process, as unit tests do, never share counts).
State (partition counts, offsets, ISR health, the controller's view) is not kept here:
the scrape-time collector (brokerd/broker_gauges.py) reads it from the broker when asked.

Names are Kafka's MBean names lower-cased and underscored; counters get `_total`.

Errors are counted per API and Kafka error name (RequestErrors), by the one dispatch
both listeners share (brokerd/serving/dispatch.py). The process collector
(prometheus-client's: CPU, memory, file descriptors, start time) is registered here,
since a registry of our own does not get it by default.

Hot paths (every request, every produced or fetched partition) add to plain integers
held per label set (found with one dict lookup) and the traffic collector below turns
them into Prometheus families when scraped: no lock and no label lookup per request,
nothing per record. That is safe because both the adding and the scraping run on the
broker's event loop. Rare events (ISR changes, elections, session expiries) use
prometheus-client's own thread-safe metrics: kazoo's threads report session states.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from kazoo.client import KazooState
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from brokerd.metrics.api_names import KAFKA_API_NAMES, UNKNOWN_API, api_name
from brokerd.metrics.error_names import error_name
from brokerd.metrics.health import isr_change

# A broker's counters start with its process: `_created` series would only repeat that.
disable_created_metrics()

# Milliseconds, from a local request answered at once to a long poll or acks=all wait.
REQUEST_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
ELECTION_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)

REPLOG_LISTENER = "REPLOG"
KAFKA_LISTENER = "KAFKA"

# The session states a broker reports, one series each (kazoo's, lower-cased).
SESSION_STATES = ("connected", "suspended", "lost")


class Latencies:
    """A histogram of one label set, as plain numbers (owned by the event loop)."""

    __slots__ = ("buckets", "count", "total_ms")

    def __init__(self) -> None:
        self.buckets = [0] * (len(REQUEST_BUCKETS_MS) + 1)  # the last one: above them all
        self.count = 0
        self.total_ms = 0.0

    def observe(self, elapsed_ms: float) -> None:
        self.buckets[bisect.bisect_left(REQUEST_BUCKETS_MS, elapsed_ms)] += 1
        self.count += 1
        self.total_ms += elapsed_ms

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus's buckets: (le, observations at or below it), +Inf last."""
        bounds = [floatToGoString(b) for b in REQUEST_BUCKETS_MS] + ["+Inf"]
        running, cumulative = 0, []
        for bound, count in zip(bounds, self.buckets, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        return cumulative


class ListenerRequests:
    """One listener's requests: a Latencies per API (its count is the request count)."""

    def __init__(self, listener: str, table: dict[tuple[str, str], Latencies]) -> None:
        self._listener = listener
        self._table = table  # shared by the listeners: (request, listener) -> Latencies
        self._by_key: dict[int, Latencies] = {}

    def record(self, api_key: int, elapsed_ms: float) -> None:
        latencies = self._by_key.get(api_key)
        if latencies is None:
            latencies = self._latencies_for(api_key)
        latencies.observe(elapsed_ms)

    def _latencies_for(self, api_key: int) -> Latencies:
        # Unserved keys all share the -1 slot: a fuzzer cannot grow this dict.
        slot = api_key if api_key in KAFKA_API_NAMES else -1
        latencies = self._by_key.get(slot)
        if latencies is None:
            name = api_name(api_key) if slot != -1 else UNKNOWN_API
            latencies = self._table.setdefault((name, self._listener), Latencies())
            self._by_key[slot] = latencies
        return latencies


class RequestErrors:
    """Error codes answered, per API and error, both listeners together: Kafka's
    ErrorsPerSec. Counted by the one dispatch (brokerd/serving/dispatch.py) for every
    non-zero code a response carries, top-level or per partition (owned by the event loop).
    """

    def __init__(self, table: dict[tuple[str, str], int]) -> None:
        self._table = table  # (request, error) -> answers that carried it

    def count(self, api_key: int, code: int) -> None:
        key = (api_name(api_key), error_name(code))
        self._table[key] = self._table.get(key, 0) + 1


@dataclass(slots=True)
class TopicTraffic:
    """One topic's BrokerTopicMetrics, as plain counts (owned by the event loop)."""

    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0


class TrafficCollector(Collector):
    """The request and topic counts, as Prometheus families, at scrape time."""

    def __init__(
        self,
        requests: dict[tuple[str, str], Latencies],
        errors: dict[tuple[str, str], int],
        topics: dict[str, TopicTraffic],
    ) -> None:
        self._requests = requests
        self._errors = errors
        self._topics = topics

    def collect(self) -> Iterator[Metric]:
        yield from self._request_families()
        yield from self._topic_families()

    def _request_families(self) -> Iterator[Metric]:
        labels = ["request", "listener"]
        count = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API and listener.",
            labels=labels,
        )
        time_ms = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request being taken up to its answer being written (ms).",
            labels=labels,
        )
        for (request, listener), latencies in sorted(self._requests.items()):
            count.add_metric([request, listener], latencies.count)
            time_ms.add_metric([request, listener], latencies.cumulative(), latencies.total_ms)
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes answered, per API and Kafka error name, both listeners together "
            "(a response with an error for each of three partitions counts three).",
            labels=["request", "error"],
        )
        for (request, error), answered in sorted(self._errors.items()):
            errors.add_metric([request, error], answered)
        yield count
        yield time_ms
        yield errors

    def _topic_families(self) -> Iterator[Metric]:
        def per_topic(name: str, documentation: str) -> CounterMetricFamily:
            return CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}", documentation, labels=["topic"]
            )

        bytes_in = per_topic("bytesin", "Bytes of records produced to partitions led here.")
        bytes_out = per_topic("bytesout", "Bytes of records sent to consumers (not replicas).")
        messages_in = per_topic(
            "messagesin", "Records appended by producers to partitions led here."
        )
        for topic, traffic in sorted(self._topics.items()):
            bytes_in.add_metric([topic], traffic.bytes_in)
            bytes_out.add_metric([topic], traffic.bytes_out)
            messages_in.add_metric([topic], traffic.messages_in)
        yield from (bytes_in, bytes_out, messages_in)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        # The standard process_* series (CPU seconds, resident and virtual memory, open
        # and maximum file descriptors, start time), read from /proc at each scrape.
        ProcessCollector(registry=registry)
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks",
            "Times the ISR of a partition led here lost a member.",
            registry=registry,
        )
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands",
            "Times the ISR of a partition led here gained a member.",
            registry=registry,
        )
        self.unclean_leader_elections = Counter(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leaders this broker, as controller, chose from outside the ISR.",
            registry=registry,
        )
        self.leader_election_time_ms = Histogram(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Time this broker, as controller, took to elect and write new leaders (ms).",
            buckets=ELECTION_BUCKETS_MS,
            registry=registry,
        )
        self.zookeeper_expires = Counter(
            "kafka_server_sessionexpirelistener_zookeeperexpires",
            "ZooKeeper sessions of this broker that were lost (expired).",
            registry=registry,
        )
        # Kafka's authorizer gauges (MBean kafka.security.authorizer.metrics), set at each
        # load of the ACLs from ZooKeeper (from kazoo's thread), plus replog's count of
        # the ACL data that load skipped because it could not be read (each also logged).
        self.acls_total = Gauge(
            "kafka_server_kafka_security_authorizer_metrics_acls_total_count",
            "ACLs the authorizer applies, as last loaded from ZooKeeper.",
            registry=registry,
        )
        self.acls_unreadable = Gauge(
            "kafka_server_kafka_security_authorizer_metrics_acls_unreadable_count",
            "ACL znodes or entries in ZooKeeper skipped at the last load: they could not "
            "be read (each is logged at WARN); the other ACLs apply.",
            registry=registry,
        )
        self._requests: dict[tuple[str, str], Latencies] = {}
        errors: dict[tuple[str, str], int] = {}
        self.request_errors = RequestErrors(errors)
        self._topics: dict[str, TopicTraffic] = {}
        registry.register(TrafficCollector(self._requests, errors, self._topics))
        self.zookeeper_state = "lost"  # no session until the broker connects

    def listener(self, name: str) -> ListenerRequests:
        """The request metrics of one listener (REPLOG or KAFKA)."""
        return ListenerRequests(name, self._requests)

    def _topic(self, topic: str) -> TopicTraffic:
        traffic = self._topics.get(topic)
        if traffic is None:
            traffic = self._topics[topic] = TopicTraffic()
        return traffic

    def produced(self, topic: str, wire_bytes: int, records_appended: int) -> None:
        traffic = self._topic(topic)
        traffic.bytes_in += wire_bytes
        traffic.messages_in += records_appended

    def fetched(self, topic: str, wire_bytes: int) -> None:
        self._topic(topic).bytes_out += wire_bytes

    def forget_topic(self, topic: str) -> None:
        """Drop a topic's series once no partition of it is here (as Kafka does)."""
        self._topics.pop(topic, None)

    def isr_changed(self, before: list[int], after: list[int]) -> None:
        """The ISR of a partition this broker leads went from `before` to `after`."""
        change = isr_change(before, after)
        if change.shrank:
            self.isr_shrinks.inc()
        if change.expanded:
            self.isr_expands.inc()

    def leader_election(self, elapsed_ms: float, unclean: int) -> None:
        """The controller wrote new leaderAndISR states; `unclean` of them chose a leader
        from outside the ISR."""
        self.leader_election_time_ms.observe(elapsed_ms)
        if unclean:
            self.unclean_leader_elections.inc(unclean)

    def zookeeper_state_changed(self, state: str, expected: bool = False) -> None:
        """kazoo's session state changed (called on kazoo's thread). A LOST session
        counts as an expiry unless `expected` (the broker closed it)."""
        self.zookeeper_state = state.lower()
        if state == KazooState.LOST and not expected:
            self.zookeeper_expires.inc()
