"""Where the cluster is: the connection options, and running the asyncio client from Spark.

Spark hands options over lower-cased (its option map is case-insensitive), so every
lookup here uses lower-case names. `replog.zookeeper.connect` is resolved to broker
addresses once, on the driver; executors only ever get the resolved list, so they need
no ZooKeeper session of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from spark_replica.client import Cluster, bootstrap_from_zookeeper, parse_bootstrap
from spark_replica.errors import ConfigError

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
    servers: str, work: Callable[[Cluster], Awaitable[T]], timeout_s: float | None = None
) -> T:
    """Run `work(cluster)` on a fresh event loop and close the cluster's connections after.

    Spark calls readers and writers from plain threads, so each call gets its own loop.
    """

    async def scoped() -> T:
        cluster = Cluster(parse_bootstrap(servers))
        try:
            if timeout_s is None:
                return await work(cluster)
            return await asyncio.wait_for(work(cluster), timeout_s)
        finally:
            await cluster.close()

    return asyncio.run(scoped())
