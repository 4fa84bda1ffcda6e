"""A broker's event metrics: counters and histograms bumped where things happen.

One BrokerMetrics per broker, with its own CollectorRegistry (never the process-wide
default, so that brokers built in one process, as unit tests do, never share counts).
State (partition counts, offsets, ISR health, the controller's view) is not kept here:
the scrape-time collector (collector.py) reads it from the broker when asked.

Names are Kafka's MBean names lower-cased and underscored; prometheus-client adds
`_total` to counters. Hot paths (every request, every produced or fetched partition)
cost a dict lookup and an increment: the labelled children are created once and
cached, and nothing is done per record.

Thread-safety: the counters lock internally, so kazoo's threads may call
`zookeeper_state_changed`; everything else is called on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.client import KazooState
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

from brokerd.metrics.api_names import KAFKA_API_NAMES, UNKNOWN_API, api_name
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


class ListenerRequests:
    """One listener's request count and latency, per API."""

    def __init__(self, listener: str, count: Counter, total_time_ms: Histogram) -> None:
        self._listener = listener
        self._count = count
        self._total_time_ms = total_time_ms
        self._children: dict[int, tuple[Counter, Histogram]] = {}

    def record(self, api_key: int, elapsed_ms: float) -> None:
        children = self._children.get(api_key)
        if children is None:
            children = self._new_children(api_key)
        count, total_time_ms = children
        count.inc()
        total_time_ms.observe(elapsed_ms)

    def _new_children(self, api_key: int) -> tuple[Counter, Histogram]:
        # Unserved keys all share the -1 slot: a fuzzer cannot grow this dict.
        slot = api_key if api_key in KAFKA_API_NAMES else -1
        children = self._children.get(slot)
        if children is None:
            name = api_name(api_key) if slot != -1 else UNKNOWN_API
            children = (
                self._count.labels(request=name, listener=self._listener),
                self._total_time_ms.labels(request=name, listener=self._listener),
            )
            self._children[slot] = children
        return children


@dataclass(frozen=True, slots=True)
class TopicTraffic:
    """The labelled children of one topic's BrokerTopicMetrics."""

    bytes_in: Counter
    bytes_out: Counter
    messages_in: Counter


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
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
        self._requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API and listener.",
            ["request", "listener"],
            registry=registry,
        )
        self._request_time_ms = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its answer being written (ms).",
            ["request", "listener"],
            buckets=REQUEST_BUCKETS_MS,
            registry=registry,
        )
        self._bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes of records produced to partitions led here, as received.",
            ["topic"],
            registry=registry,
        )
        self._bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Bytes of records sent to consumers (not replicas), as sent.",
            ["topic"],
            registry=registry,
        )
        self._messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by producers to partitions led here.",
            ["topic"],
            registry=registry,
        )
        self.zookeeper_expires = Counter(
            "kafka_server_sessionexpirelistener_zookeeperexpires",
            "ZooKeeper sessions of this broker that were lost (expired).",
            registry=registry,
        )
        self._topics: dict[str, TopicTraffic] = {}
        self.zookeeper_state = "lost"  # no session until the broker connects

    def listener(self, name: str) -> ListenerRequests:
        """The request metrics of one listener (REPLOG or KAFKA)."""
        return ListenerRequests(name, self._requests, self._request_time_ms)

    def topic(self, topic: str) -> TopicTraffic:
        traffic = self._topics.get(topic)
        if traffic is None:
            traffic = TopicTraffic(
                self._bytes_in.labels(topic=topic),
                self._bytes_out.labels(topic=topic),
                self._messages_in.labels(topic=topic),
            )
            self._topics[topic] = traffic
        return traffic

    def produced(self, topic: str, wire_bytes: int, records_appended: int) -> None:
        traffic = self.topic(topic)
        traffic.bytes_in.inc(wire_bytes)
        traffic.messages_in.inc(records_appended)

    def fetched(self, topic: str, wire_bytes: int) -> None:
        self.topic(topic).bytes_out.inc(wire_bytes)

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's series (Kafka removes its topic metrics too)."""
        if self._topics.pop(topic, None) is not None:
            for family in (self._bytes_in, self._bytes_out, self._messages_in):
                family.remove(topic)

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
