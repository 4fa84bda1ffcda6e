"""A broker's Prometheus metrics under Kafka's names.

registry.py holds the counters and histograms bumped where things happen (requests,
produced and fetched bytes, ISR changes, elections, ZooKeeper sessions); collector.py
computes the state gauges (partitions, offsets, ISR health, the controller's counts)
at scrape time; http_server.py answers GET /metrics on the broker's event loop.
"""

from brokerd.metrics.collector import BrokerStateCollector
from brokerd.metrics.http_server import MetricsServer
from brokerd.metrics.registry import (
    KAFKA_LISTENER,
    REPLOG_LISTENER,
    BrokerMetrics,
    ListenerRequests,
)

__all__ = [
    "KAFKA_LISTENER",
    "REPLOG_LISTENER",
    "BrokerMetrics",
    "BrokerStateCollector",
    "ListenerRequests",
    "MetricsServer",
]
