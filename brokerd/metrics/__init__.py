"""A broker's Prometheus metrics under Kafka's names.

registry.py holds the counters and histograms bumped where things happen (requests and
the errors they answered, produced and fetched bytes, ISR changes, elections, ZooKeeper
sessions) and the process collector; http_server.py answers GET /metrics on the broker's
event loop. The state gauges (partitions, offsets, ISR health, follower lag, the
controller's counts, consumer-group lag), computed at scrape time, are
brokerd/broker_gauges.py's: it reads the broker's parts, which use this package, so it
sits above them. The pure rules are here: api_names.py and error_names.py (Kafka's
names for label values), health.py (partition health), group_lag.py (consumer lag).
Every series is listed, with its meaning, in docs/monitoring.md.
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
