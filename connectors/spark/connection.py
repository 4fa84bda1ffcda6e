"""Where the cluster is: the connection options, and running the asyncio client from Spark.

Spark hands options over lower-cased (its option map is case-insensitive), so every
lookup here uses lower-case names. `replog.zookeeper.connect` is resolved to broker
addresses once, on the driver; executors only ever get the resolved list, so they need
no ZooKeeper session of their own.

Also the driver's questions to the cluster when it plans a read: which partitions a
subscription covers now, and where an offset option says to start or end (the client's
`list_offsets` asks again while a leader moves, so a broker failure delays planning
instead of failing it).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from connectors.spark.offsets import offsets_for_timestamps, resolve_offsets
from connectors.spark.source_options import ASSIGN, OffsetSpec, Subscription
from spark_replica.client import (
    Cluster,
    IsolationLevel,
    bootstrap_from_zookeeper,
    list_offsets,
    parse_bootstrap,
)
from spark_replica.errors import ConfigError
from spark_replica.security.settings import SecurityConfig
from spark_replica.topics import TopicPartition

T = TypeVar("T")

BOOTSTRAP_OPTION = "replog.bootstrap.servers"
KAFKA_BOOTSTRAP_OPTION = "kafka.bootstrap.servers"
ZOOKEEPER_OPTION = "replog.zookeeper.connect"


def bootstrap_servers(options: Mapping[str, str]) -> str:
    """The `host:port,...` list to connect to, from whichever connection option was given."""
    given = {
        name: options[name].strip()
        for name in (BOOTSTRAP_OPTION, KAFKA_BOOTSTRAP_OPTION, ZOOKEEPER_OPTION)
        if name in options and options[name].strip()
    }
    if not given:
        raise ConfigError(
            f"set {BOOTSTRAP_OPTION} (host:port,...) or {ZOOKEEPER_OPTION} "
            f"({KAFKA_BOOTSTRAP_OPTION} is accepted as an alias of the first)"
        )
    if ZOOKEEPER_OPTION in given:
        if len(given) > 1:
            others = " and ".join(n for n in given if n != ZOOKEEPER_OPTION)
            raise ConfigError(f"give either {ZOOKEEPER_OPTION} or {others}, not both")
        addresses = bootstrap_from_zookeeper(given[ZOOKEEPER_OPTION])
        return ",".join(f"{host}:{port}" for host, port in addresses)
    servers = set(given.values())
    if len(servers) > 1:
        raise ConfigError(
            f"{BOOTSTRAP_OPTION} and {KAFKA_BOOTSTRAP_OPTION} name different servers; give one"
        )
    (value,) = servers
    name = next(iter(given))
    try:
        parse_bootstrap(value)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from exc
    return value


def run_with_cluster(
    servers: str,
    work: Callable[[Cluster], Awaitable[T]],
    timeout_s: float | None = None,
    *,
    security: SecurityConfig,
) -> T:
    """Run `work(cluster)` on a fresh event loop and close the cluster's connections after.

    Spark calls readers and writers from plain threads, so each call gets its own loop.
    """

    async def scoped() -> T:
        cluster = Cluster(parse_bootstrap(servers), security=security)
        try:
            if timeout_s is None:
                return await work(cluster)
            return await asyncio.wait_for(work(cluster), timeout_s)
        finally:
            await cluster.close()

    return asyncio.run(scoped())


async def subscribed_partitions(
    cluster: Cluster, subscription: Subscription
) -> list[TopicPartition]:
    """Every partition the subscription covers that exists right now, in order.

    A subscribed topic that does not exist (yet, or any more) simply has no partitions:
    the stream reader tells new and deleted partitions apart by comparing these with
    the partitions of its start offsets.
    """
    response = await cluster.refresh(subscription.topic_names())
    found = []
    for topic in response.topics:
        if topic.error_code or not subscription.wants(topic.topic):
            continue
        for partition in topic.partitions:
            tp = TopicPartition(topic.topic, partition.partition)
            if subscription.mode == ASSIGN and tp not in subscription.partitions:
                continue
            found.append(tp)
    return sorted(found)


async def resolve_offset_spec(
    cluster: Cluster,
    spec: OffsetSpec,
    partitions: list[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    unnamed: int,
    fail_without_match: bool,
    wait_s: float,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[TopicPartition, int]:
    """Offsets for every partition from where an option said to start or end.

    Partitions the option does not name get `unnamed`: EARLIEST for a start (as new
    partitions do), LATEST for an end. Naming one that does not exist is an error.
    `latest` is the readable end under `isolation_level`, below which times are looked
    up too (the LSO under read_committed).
    """
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in partitions}
    unknown = sorted(set(spec.offsets) - set(partitions))
    if unknown:
        raise ConfigError(f"{spec.option} names {unknown[0]}, which does not exist")
    if spec.kind == "offsets":
        requested = {tp: spec.offsets.get(tp, unnamed) for tp in partitions}
        return resolve_offsets(requested, earliest, latest)
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        wanted = {tp: spec.timestamp for tp in partitions}
    else:
        wanted = dict(spec.offsets)
    by_timestamp: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp, timestamp in wanted.items():
        by_timestamp[timestamp].append(tp)
    found: dict[TopicPartition, int] = {}
    for timestamp, tps in by_timestamp.items():
        answers = await list_offsets(
            cluster, tps, timestamp, wait_s=wait_s, isolation_level=isolation_level
        )
        found.update({tp: offset for tp, (offset, _) in answers.items()})
    resolved = offsets_for_timestamps(
        found, latest, fail_without_match=fail_without_match, option=spec.option
    )
    rest = {tp: unnamed for tp in partitions if tp not in resolved}
    return {**resolve_offsets(rest, earliest, latest), **resolved}
