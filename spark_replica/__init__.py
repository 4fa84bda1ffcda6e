"""replog's library: the client (cluster routing, producer, consumer, admin), the wire
codecs, records, ZooKeeper layout and security, with the operator tools above it in
`spark_replica.tools`.

The names a program using replog needs are exported here, as well as from their own
modules. They load when first used (PEP 562), so that importing one module of the
library, as the broker, the CLI and Spark's executors do, does not load the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_replica.client import (
        EARLIEST,
        LATEST,
        Admin,
        Cluster,
        Consumer,
        ConsumerConfig,
        ConsumerRecord,
        Producer,
        ProducerConfig,
        RecordMetadata,
        SyncConsumer,
        SyncProducer,
        parse_bootstrap,
    )
    from spark_replica.errors import (
        AuthenticationError,
        BrokerResponseError,
        ConfigError,
        DeliveryTimeoutError,
        ReplogError,
        TimeoutExpiredError,
    )
    from spark_replica.topics import TopicPartition

# Each exported name and the module that defines (or exports) it.
_HOMES = {
    "EARLIEST": "spark_replica.client",
    "LATEST": "spark_replica.client",
    "Admin": "spark_replica.client",
    "Cluster": "spark_replica.client",
    "Consumer": "spark_replica.client",
    "ConsumerConfig": "spark_replica.client",
    "ConsumerRecord": "spark_replica.client",
    "Producer": "spark_replica.client",
    "ProducerConfig": "spark_replica.client",
    "RecordMetadata": "spark_replica.client",
    "SyncConsumer": "spark_replica.client",
    "SyncProducer": "spark_replica.client",
    "parse_bootstrap": "spark_replica.client",
    "AuthenticationError": "spark_replica.errors",
    "BrokerResponseError": "spark_replica.errors",
    "ConfigError": "spark_replica.errors",
    "DeliveryTimeoutError": "spark_replica.errors",
    "ReplogError": "spark_replica.errors",
    "TimeoutExpiredError": "spark_replica.errors",
    "TopicPartition": "spark_replica.topics",
}

__all__ = [
    "EARLIEST",
    "LATEST",
    "Admin",
    "AuthenticationError",
    "BrokerResponseError",
    "Cluster",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "DeliveryTimeoutError",
    "Producer",
    "ProducerConfig",
    "RecordMetadata",
    "ReplogError",
    "SyncConsumer",
    "SyncProducer",
    "TimeoutExpiredError",
    "TopicPartition",
    "parse_bootstrap",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
