"""Topic admin, the same on both listeners: the checks and the ZooKeeper writes.

Topic changes are written to ZooKeeper (off the event loop: kazoo blocks); the brokers
pick them up from there like any other change, so an answer means "written", not
"every broker has applied it". Clients wait on Metadata for the latter.

A partition count above max.partitions.per.topic is refused with INVALID_PARTITIONS
before anything is read or built (`check_partition_count`, validate_only too): an
assignment is built in memory for every partition asked, and 2^31-1 of them would take
the broker's memory. `check_new_topic` and `check_growth` are what creating a topic or
adding partitions would check, without writing (Kafka's validate_only).
`settle_new_topic` fills in what a create request leaves unset from the broker's
defaults, for both listeners alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from spark_replica.reassignment import assign_replicas
from spark_replica.topic_config import (
    MIN_INSYNC_REPLICAS,
    check_min_insync_fits,
    parse_topic_configs,
)
from spark_replica.topics import validate_topic_name
from spark_replica.wire.native.topic_admin import USE_BROKER_DEFAULT
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import translated


def settle_new_topic(
    ctx: BrokerContext,
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
) -> tuple[int, int]:
    """The partition count and replication factor a new topic gets: the request's, or
    where it leaves one unset (USE_BROKER_DEFAULT) the broker's num.partitions and
    default.replication.factor, as Kafka's brokers do. The topic's own
    min.insync.replicas above that replication factor is refused here, before anything
    is written; the broker-wide default is not, as in Kafka (a topic of one replica on
    brokers that want two is allowed, and its acks=all writes fail at once)."""
    if partitions == USE_BROKER_DEFAULT:
        partitions = ctx.config.num_partitions
    if replication_factor == USE_BROKER_DEFAULT:
        replication_factor = ctx.config.default_replication_factor
    if replication_factor >= 1 and MIN_INSYNC_REPLICAS in configs:
        check_min_insync_fits(topic, ctx.config.min_insync_for(configs), replication_factor)
    return partitions, replication_factor


def check_partition_count(ctx: BrokerContext, topic: str, partitions: int) -> None:
    """Refuse asking `topic` to have more partitions than max.partitions.per.topic."""
    bound = ctx.config.max_partitions_per_topic
    if partitions > bound:
        raise InvalidPartitionsError(
            f"topic {topic!r}: {partitions} partitions is over the broker's "
            f"max.partitions.per.topic ({bound}); ask for fewer or raise that config"
        )


async def write_topic(
    ctx: BrokerContext,
    topic: str,
    partitions: int | None,
    write: Callable[[KazooClient], object],
) -> None:
    """Run one topic's blocking ZooKeeper work in a worker thread, after checking the
    partition count it asks for (None: it asks for none); failures stay typed."""
    if partitions is not None:
        check_partition_count(ctx, topic, partitions)
    if ctx.zk is None:
        raise UnknownServerError("the broker has no ZooKeeper session")
    await asyncio.to_thread(write, ctx.zk)


def check_new_topic(
    zk: KazooClient, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> None:
    """What creating the topic would check, without writing it (validate_only)."""
    validate_topic_name(topic)
    if partitions < 1:
        raise InvalidPartitionsError(f"partitions must be at least 1, not {partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, not {replication_factor}"
        )
    parse_topic_configs(configs)
    with translated():
        exists = zk.exists(znodes.topic_path(topic))
    if exists:
        raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
    assign_replicas(topic_store.live_broker_ids(zk), partitions, replication_factor)


def check_growth(zk: KazooClient, topic: str, count: int) -> None:
    """What adding partitions up to `count` would check, without writing (validate_only)."""
    validate_topic_name(topic)
    assignment = topic_store.read_assignment(zk, topic)
    if assignment is None:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    current = len(assignment.partitions)
    if count <= current:
        raise InvalidPartitionsError(
            f"topic {topic!r} has {current} partitions; it can only grow, not to {count}"
        )
