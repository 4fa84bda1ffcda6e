"""The replog client: cluster metadata and routing, producer, consumer, admin."""

from spark_replica.client.admin import Admin, PartitionDescription
from spark_replica.client.buffer_pool import BufferPool
from spark_replica.client.cluster import Cluster, bootstrap_from_zookeeper, parse_bootstrap
from spark_replica.client.connection import BrokerConnection
from spark_replica.client.consumer import Consumer, ConsumerConfig
from spark_replica.client.consumer_records import ConsumerRecord
from spark_replica.client.fetched import CREATE_TIME, LOG_APPEND_TIME, FetchedRecords, RecordsLost
from spark_replica.client.in_flight import SEQUENCE_SPACE
from spark_replica.client.list_offsets import EARLIEST, LATEST, list_offsets
from spark_replica.client.partitioner import murmur2, partition_for_key
from spark_replica.client.producer import Producer, RecordMetadata
from spark_replica.client.producer_config import ProducerConfig, parse_acks
from spark_replica.client.range_reader import RangeReader
from spark_replica.client.retry import DEFAULT_RETRY_POLICY, Attempts, RetryPolicy
from spark_replica.client.sequenced_producer import SendOutcome, SequencedProducer
from spark_replica.client.sink_transactions import Participant as SinkParticipant
from spark_replica.client.sink_transactions import SinkTransactionCalls
from spark_replica.client.sync import SyncProducer
from spark_replica.client.sync_consumer import SyncConsumer
from spark_replica.client.transactional_producer import TransactionalProducer
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.produce import ACKS_ALL, ACKS_LEADER, ACKS_NONE

__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "CREATE_TIME",
    "DEFAULT_RETRY_POLICY",
    "EARLIEST",
    "LATEST",
    "LOG_APPEND_TIME",
    "SEQUENCE_SPACE",
    "Admin",
    "Attempts",
    "BrokerConnection",
    "BufferPool",
    "Cluster",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "FetchedRecords",
    "IsolationLevel",
    "PartitionDescription",
    "Producer",
    "ProducerConfig",
    "RangeReader",
    "RecordMetadata",
    "RecordsLost",
    "RetryPolicy",
    "SendOutcome",
    "SequencedProducer",
    "SinkParticipant",
    "SinkTransactionCalls",
    "SyncConsumer",
    "SyncProducer",
    "TransactionalProducer",
    "bootstrap_from_zookeeper",
    "list_offsets",
    "murmur2",
    "parse_acks",
    "parse_bootstrap",
    "partition_for_key",
]
