"""Cluster metadata and routing: who leads each partition, and connections to them.

Bootstrapped from a broker list or from ZooKeeper's `/brokers/ids`; afterwards all
metadata comes from the brokers (Metadata requests), which follow ZooKeeper. Each
refresh asks the next known broker in turn, and an answer never moves a partition back
to an older leader epoch than one already known (metadata_freshness.py). Requests of
different kinds use different connections to a broker ("purpose"), so that a
long-polling fetch never holds up a produce queued behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from spark_replica.errors import (
    ConfigError,
    ConnectionLostError,
    LeaderNotAvailableError,
    ReplogError,
    error_for_code,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.metadata import (
    NO_LEADER,
    BrokerInfo,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)

from .connection import BrokerConnection
from .metadata_freshness import in_turn, merge_topics
from .retry import DEFAULT_RETRY_POLICY, Attempts, RetryPolicy

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

# How long to wait for a topic's metadata to appear before giving up on it.
DEFAULT_METADATA_WAIT_S = 5.0
# A Metadata request is answered at once by a healthy broker; one that takes longer is
# skipped for a while in favour of the others (it may be paused or overloaded).
METADATA_REQUEST_TIMEOUT_S = 5.0
UNRESPONSIVE_COOLDOWN_S = 30.0


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """`host:port,host:port` -> [(host, port)]; raise ConfigError naming the bad entry.

    An IPv6 host may be written in brackets (`[::1]:9092`), as Kafka's clients take it.
    """
    addresses = []
    for entry in servers.split(","):
        entry = entry.strip()
        host, colon, port = entry.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap server {entry!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ConfigError("the bootstrap server list is empty")
    return addresses


def bootstrap_from_zookeeper(connect_string: str) -> list[tuple[str, int]]:
    """Read the live brokers' addresses from ZooKeeper (blocking)."""
    from spark_replica.zk import topic_store
    from spark_replica.zk.session import connect

    zk = connect(connect_string, create_chroot=False)
    try:
        brokers = topic_store.read_brokers(zk)
    finally:
        zk.stop()
        zk.close()
    if not brokers:
        raise ConfigError(f"no broker is registered in ZooKeeper at {connect_string}")
    return [(b.host, b.port) for b in brokers]


class Cluster:
    def __init__(
        self,
        bootstrap: Iterable[tuple[str, int]],
        client_id: str = "replog",
        metadata_wait_s: float = DEFAULT_METADATA_WAIT_S,
        security: SecurityConfig | None = None,
        retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        self.bootstrap = list(bootstrap)
        self.retry_policy = retry_policy
        self.security = security
        self.client_id = client_id
        self.metadata_wait_s = metadata_wait_s
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self._connections: dict[tuple[int | str, str], BrokerConnection] = {}
        # Connections being opened: callers that want the same one wait for it.
        self._connecting: dict[tuple[int | str, str], asyncio.Future[BrokerConnection]] = {}
        self._refresh_lock = asyncio.Lock()
        self._unresponsive_until: dict[tuple[str, int], float] = {}
        self.metadata_source: str | None = None  # host:port that answered the last refresh
        self._last_asked: int | None = None  # broker id of the last metadata answer
        # Per topic, when the latest successful refresh that asked for it started.
        self._refresh_started: dict[str, float] = {}

    async def connection(self, broker_id: int, purpose: str = "default") -> BrokerConnection:
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise LeaderNotAvailableError(f"broker {broker_id} is not in the cluster metadata")
        return await self._connect((broker_id, purpose), broker.host, broker.port)

    async def leader_connection(
        self, tp: TopicPartition, purpose: str = "default"
    ) -> BrokerConnection:
        """The connection to `tp`'s leader as the metadata says now (no refresh, no wait)."""
        return await self.connection(self.leader_for(tp), purpose)

    async def _connect(self, key: tuple[int | str, str], host: str, port: int) -> BrokerConnection:
        """The usable connection for `key`, opened once however many callers ask at once."""
        existing = self._connections.get(key)
        if existing is not None and existing.is_usable:
            return existing
        opening = self._connecting.get(key)
        if opening is None:
            opening = asyncio.ensure_future(self._open(key, host, port))
            self._connecting[key] = opening
            opening.add_done_callback(lambda done: self._opened(key, done))
        # Shielded: one caller giving up must not cancel the others' connection.
        return await asyncio.shield(opening)

    async def _open(self, key: tuple[int | str, str], host: str, port: int) -> BrokerConnection:
        conn = BrokerConnection(host, port, client_id=self.client_id, security=self.security)
        await conn.connect()
        self._connections[key] = conn
        return conn

    def _opened(self, key: tuple[int | str, str], done: asyncio.Future[BrokerConnection]) -> None:
        if self._connecting.get(key) is done:
            del self._connecting[key]
        if not done.cancelled():
            done.exception()  # retrieved here in case every caller has given up

    def _candidates(self, after: int | None = None) -> list[tuple[tuple[int | str, str], str, int]]:
        """Known brokers (from the one after `after`), then bootstrap ones; unresponsive last."""
        known = [self.brokers[broker_id] for broker_id in in_turn(self.brokers, after)]
        candidates: list[tuple[tuple[int | str, str], str, int]] = [
            ((b.broker_id, "default"), b.host, b.port) for b in known
        ]
        candidates += [((f"{h}:{p}", "bootstrap"), h, p) for h, p in self.bootstrap]
        now = asyncio.get_running_loop().time()
        return sorted(
            candidates, key=lambda c: self._unresponsive_until.get((c[1], c[2]), 0.0) > now
        )

    async def any_connection(self) -> BrokerConnection:
        """A connection to some live broker: known ones first, then the bootstrap list."""
        errors = []
        for key, host, port in self._candidates():
            try:
                return await self._connect(key, host, port)
            except ConnectionLostError as exc:
                errors.append(str(exc))
        raise ConnectionLostError("no broker reachable: " + "; ".join(errors))

    async def refresh(self, topics: list[str] | None = None) -> MetadataResponse:
        """Fetch metadata from the next broker and merge it into what we know.

        Each refresh starts at the next known broker. One that cannot be reached or
        does not answer within METADATA_REQUEST_TIMEOUT_S is skipped (and asked last
        for a while), so a paused broker delays a refresh by seconds, not by the request
        timeout.
        """
        async with self._refresh_lock:
            return await self._refresh_locked(topics)

    async def refresh_if_older(self, topics: list[str], since: float) -> bool:
        """Refresh `topics` unless a refresh that asked for them started at `since` or later
        (event loop time); whether this call refreshed.

        Many partitions of a topic learn of a failover at once: the first to ask refreshes,
        and those queued behind it take its answer instead of asking again.
        """
        async with self._refresh_lock:
            if all(self._refresh_started.get(topic, -1.0) >= since for topic in topics):
                return False
            await self._refresh_locked(topics)
            return True

    async def _refresh_locked(self, topics: list[str] | None) -> MetadataResponse:
        started = asyncio.get_running_loop().time()
        response, host, port = await self._ask_in_turn(
            MetadataRequest(topics), METADATA_REQUEST_TIMEOUT_S
        )
        self.metadata_source = f"{host}:{port}"
        self.apply_metadata(response, complete=topics is None)
        self._last_asked = next(
            (b.broker_id for b in response.brokers if (b.host, b.port) == (host, port)), None
        )
        for topic in response.topics:
            self._refresh_started[topic.topic] = started
        return response

    async def send_to_any(self, request: Any, timeout_s: float = METADATA_REQUEST_TIMEOUT_S) -> Any:
        """Send a request any broker can serve (InitProducerId) to one that answers.

        As for metadata, a broker that cannot be reached or does not answer within
        `timeout_s` is skipped and asked last for a while: a paused broker must not
        hold up a producer's new epoch for a whole request timeout. The broker that last
        answered a metadata request is asked first: it was just heard from, where the
        next in turn may be paused or cut off, and a producer's wait for its id counts
        against its records' delivery timeout.
        """
        response, _, _ = await self._ask_in_turn(request, timeout_s, first=self._last_asked)
        return response

    async def _ask_in_turn(
        self, request: Any, timeout_s: float, first: int | None = None
    ) -> tuple[Any, str, int]:
        errors = []
        candidates = self._candidates(after=self._last_asked)
        if first is not None:
            candidates.sort(key=lambda c: c[0][0] != first)  # stable: the rest keep their turn
        for key, host, port in candidates:
            try:
                # A host behind a partition drops the SYN: give up on it as soon as on
                # one that does not answer, not after the whole connect timeout.
                try:
                    conn = await asyncio.wait_for(self._connect(key, host, port), timeout_s)
                except TimeoutError:
                    raise ConnectionLostError(
                        f"cannot connect to broker at {host}:{port} within {timeout_s:.1f} s"
                    ) from None
                response = await conn.send(request, timeout_s=timeout_s)
            except ConnectionLostError as exc:
                loop = asyncio.get_running_loop()
                self._unresponsive_until[(host, port)] = loop.time() + UNRESPONSIVE_COOLDOWN_S
                errors.append(str(exc))
                continue
            self._unresponsive_until.pop((host, port), None)
            return response, host, port
        raise ConnectionLostError("no broker answered: " + "; ".join(errors))

    def apply_metadata(self, response: MetadataResponse, *, complete: bool) -> None:
        """Take in a Metadata answer; `complete` when it answers a request for every topic.

        Partition states older (by leader epoch) than those known are ignored: the
        broker that answered may not have heard of the latest elections yet.
        """
        self.brokers = {b.broker_id: b for b in response.brokers}
        self.topics = merge_topics(self.topics, response.topics, complete=complete)

    def topic(self, name: str) -> TopicMetadata:
        metadata = self.topics.get(name)
        if metadata is None:
            raise LeaderNotAvailableError(f"no metadata for topic {name!r} yet")
        if metadata.error_code:
            raise error_for_code(metadata.error_code, metadata.error_message or name)
        return metadata

    async def ensure_topic(self, name: str) -> TopicMetadata:
        """The topic's metadata, waiting up to `metadata_wait_s` while it is not known yet.

        Right after a topic is created, or a broker restarts, its metadata may take a
        moment to reach every broker; like Kafka's clients this waits rather than fail.
        """
        loop = asyncio.get_running_loop()
        attempts = Attempts(self.retry_policy, loop.time() + self.metadata_wait_s)
        while True:
            if name not in self.topics or self.topics[name].error_code:
                await self.refresh([name])
            try:
                return self.topic(name)
            except ReplogError as exc:
                delay = attempts.next_delay(exc, loop.time())
                if delay is None:
                    raise
            await asyncio.sleep(delay)

    def partition(self, tp: TopicPartition) -> PartitionMetadata:
        for partition in self.topic(tp.topic).partitions:
            if partition.partition == tp.partition:
                return partition
        raise error_for_code(3, f"topic {tp.topic!r} has no partition {tp.partition}")

    def leader_for(self, tp: TopicPartition) -> int:
        partition = self.partition(tp)
        if partition.leader == NO_LEADER or partition.error_code:
            raise LeaderNotAvailableError(f"{tp} has no leader right now")
        return partition.leader

    async def close(self) -> None:
        opening = list(self._connecting.values())
        for future in opening:
            future.cancel()
        await asyncio.gather(*opening, return_exceptions=True)
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            with contextlib.suppress(ReplogError, OSError):
                await conn.close()
