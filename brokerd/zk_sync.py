"""The broker's ZooKeeper session: registration, and noticing partitions that go away.

kazoo runs watch callbacks and session listeners on its own threads; they only hand a
"something changed" signal to the event loop (call_soon_threadsafe). One refresher task
on the loop then reads the assignments in a worker thread and hands them to the broker,
coalescing bursts of changes into one read. Leadership does not come from here: it
comes from the controller's LeaderAndIsr requests.

The registration is an ephemeral znode, so it disappears when the session ends. Its
czxid is this incarnation's broker epoch. After a lost session (expired, e.g. a long
pause) the broker registers again as soon as kazoo has a new session, with a new epoch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState

from spark_replica.errors import ZnodeExistsError, ZooKeeperError
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import translated
from spark_replica.zk.session import connect

logger = logging.getLogger("brokerd.zk")


class ZooKeeperSync:
    def __init__(
        self,
        connect_string: str,
        registration: znodes.BrokerRegistration,
        on_assignments: Callable[[dict[TopicPartition, list[int]], int], None],
        marker: Callable[[], int],
        on_registered: Callable[[int], None],
        session_timeout_s: float,
    ) -> None:
        self.connect_string = connect_string
        self.registration = registration
        self.on_assignments = on_assignments
        self.marker = marker
        self.on_registered = on_registered
        self.session_timeout_s = session_timeout_s
        self.zk: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._reregister = False
        self._refresher: asyncio.Task[None] | None = None

    async def connect(self) -> KazooClient:
        self._loop = asyncio.get_running_loop()
        self.zk = await asyncio.to_thread(
            connect, self.connect_string, session_timeout_s=self.session_timeout_s
        )
        self.zk.add_listener(self._on_session_state)
        return self.zk

    async def start(self) -> None:
        """Drop the logs of partitions no longer assigned here, register, follow changes."""
        assert self.zk is not None
        await self._apply_assignments()
        self.on_registered(await asyncio.to_thread(self._register, self.zk))
        self.zk.ChildrenWatch(znodes.TOPICS_PATH, self._on_children)
        self._refresher = asyncio.create_task(self._refresh_forever())

    async def _apply_assignments(self) -> None:
        assert self.zk is not None
        marker = self.marker()
        self.on_assignments(await asyncio.to_thread(read_assignments, self.zk), marker)

    def _register(self, zk: KazooClient) -> int:
        """Create our ephemeral znode (waiting out a previous session's); return its czxid."""
        path = znodes.broker_path(self.registration.broker_id)
        deadline = time.monotonic() + self.session_timeout_s * 2
        with translated():
            zk.ensure_path(znodes.BROKER_IDS_PATH)
            zk.ensure_path(znodes.TOPICS_PATH)
        while True:
            try:
                with translated():
                    zk.create(path, self.registration.encode(), ephemeral=True)
            except ZnodeExistsError:
                with translated():
                    stat = zk.exists(path)
                if stat is not None and stat.ephemeralOwner == zk.client_id[0]:
                    return stat.czxid
                if time.monotonic() > deadline:
                    raise ZooKeeperError(
                        f"{path} is held by another live session: is broker id "
                        f"{self.registration.broker_id} already running?"
                    ) from None
                time.sleep(0.25)
                continue
            with translated():
                stat = zk.exists(path)
            if stat is not None:
                logger.info("registered %s (broker epoch %d)", path, stat.czxid)
                return stat.czxid

    def _on_children(self, children: list[str]) -> bool:
        self._signal()
        return True

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._reregister = True
        elif state == KazooState.CONNECTED and self._reregister:
            self._signal()

    def _signal(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._changed.set)

    async def _refresh_forever(self) -> None:
        assert self.zk is not None
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                if self._reregister:
                    self._reregister = False
                    self.on_registered(await asyncio.to_thread(self._register, self.zk))
                await self._apply_assignments()
            except Exception:
                logger.exception("following ZooKeeper failed; retrying")
                await asyncio.sleep(1)
                self._changed.set()

    async def stop(self) -> None:
        """Deregister (the ephemeral znode goes with the session) and close."""
        if self._refresher is not None:
            self._refresher.cancel()
        if self.zk is not None:
            zk = self.zk
            self.zk = None
            await asyncio.to_thread(_close, zk)


def read_assignments(zk: KazooClient) -> dict[TopicPartition, list[int]]:
    """Every partition's replica list, from /brokers/topics (blocking)."""
    assignments: dict[TopicPartition, list[int]] = {}
    for topic in topic_store.list_topics(zk):
        assignment = topic_store.read_assignment(zk, topic)
        if assignment is not None:
            for partition, replicas in assignment.partitions.items():
                assignments[TopicPartition(topic, partition)] = replicas
    return assignments


def _close(zk: KazooClient) -> None:
    zk.stop()
    zk.close()
