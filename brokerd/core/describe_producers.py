"""DescribeProducers: the producers a partition's replica knows, as Kafka's
`kafka-transactions describe-producers` and `find-hanging` read them.

The answer for a partition is its producer state's own summary
(ProducerStateManager.active_producers): per producer id its epoch, the last sequence
and timestamp it wrote, the coordinator epoch of its latest marker and where its open
transaction began (-1: none). Any replica answers, followers from the state they
rebuild as they replicate, as in Kafka: `find-hanging --broker-id N` asks broker N about
every partition it holds. A broker that hosts no replica of the partition answers
NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such
partition).
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.partitions import hosted_partition
from brokerd.replication.producer_state import ActiveProducer
from spark_replica.topics import TopicPartition


def active_producers(ctx: BrokerContext, tp: TopicPartition) -> list[ActiveProducer]:
    """The producers of `tp` as this broker's replica knows them, by producer id."""
    return hosted_partition(ctx, tp).producer_state.active_producers()
