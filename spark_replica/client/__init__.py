"""The replog client: cluster metadata and routing, producer, consumer, admin."""

from spark_replica.client.admin import Admin, PartitionDescription
from spark_replica.client.cluster import Cluster, bootstrap_from_zookeeper, parse_bootstrap
from spark_replica.client.connection import BrokerConnection
from spark_replica.client.consumer import Consumer, ConsumerConfig, FetchedRecords
from spark_replica.client.partitioner import murmur2, partition_for_key
from spark_replica.client.producer import Producer, ProducerConfig, RecordMetadata, parse_acks
from spark_replica.client.retry import DEFAULT_RETRY_POLICY, Attempts, RetryPolicy

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "Admin",
    "Attempts",
    "BrokerConnection",
    "Cluster",
    "Consumer",
    "ConsumerConfig",
    "FetchedRecords",
    "PartitionDescription",
    "Producer",
    "ProducerConfig",
    "RecordMetadata",
    "RetryPolicy",
    "bootstrap_from_zookeeper",
    "murmur2",
    "parse_acks",
    "parse_bootstrap",
    "partition_for_key",
]
