"""A broker's Prometheus metrics under Kafka's names.

registry.py holds the counters and histograms bumped where things happen (requests,
produced and fetched bytes, ISR changes, elections, ZooKeeper sessions); http_server.py
answers GET /metrics on the broker's event loop. The state gauges (partitions, offsets,
ISR health, the controller's counts), computed at scrape time, are
brokerd/broker_gauges.py's: it reads the broker's parts, which use this package, so it
sits above them.
"""

from brokerd.metrics.http_server import MetricsServer
from brokerd.metrics.registry import (
    KAFKA_LISTENER,
    REPLOG_LISTENER,
    BrokerMetrics,
    ListenerRequests,
    RequestErrors,
)

__all__ = [
    "KAFKA_LISTENER",
    "REPLOG_LISTENER",
    "BrokerMetrics",
    "ListenerRequests",
    "MetricsServer",
    "RequestErrors",
]
