"""The broker's ZooKeeper session: registration, and telling the broker what changed.

kazoo runs watch callbacks and session listeners on its own threads; they only hand a
"something changed" signal to the event loop (call_soon_threadsafe). One refresher task
on the loop then reads the cluster view in a worker thread and applies it on the loop,
coalescing bursts of changes into one read.

The registration is an ephemeral znode, so it disappears when the session ends. After a
lost session (expired, e.g. a long pause) the broker registers again as soon as kazoo
has a new session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError

from brokerd.cluster_view import ClusterView, read_cluster_view
from spark_replica.errors import ZooKeeperError
from spark_replica.zk import znodes
from spark_replica.zk.session import connect

logger = logging.getLogger("brokerd.zk")


class ZooKeeperSync:
    def __init__(
        self,
        connect_string: str,
        registration: znodes.BrokerRegistration,
        apply_view: Callable[[ClusterView], None],
        session_timeout_s: float,
    ) -> None:
        self.connect_string = connect_string
        self.registration = registration
        self.apply_view = apply_view
        self.session_timeout_s = session_timeout_s
        self.zk: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._reregister = False
        self._refresher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect, register, read the first view and start following changes."""
        self._loop = asyncio.get_running_loop()
        self.zk = await asyncio.to_thread(
            connect, self.connect_string, session_timeout_s=self.session_timeout_s
        )
        self.zk.add_listener(self._on_session_state)
        # The first view is applied before registering: once clients can find this
        # broker, it already knows every topic and partition it hosts.
        self.apply_view(await asyncio.to_thread(read_cluster_view, self.zk))
        await asyncio.to_thread(self._register, self.zk)
        self.zk.ChildrenWatch(znodes.BROKER_IDS_PATH, self._on_children)
        self.zk.ChildrenWatch(znodes.TOPICS_PATH, self._on_children)
        self._refresher = asyncio.create_task(self._refresh_forever())

    def _register(self, zk: KazooClient) -> None:
        """Create our ephemeral znode, waiting out a previous session's that still lingers."""
        path = znodes.broker_path(self.registration.broker_id)
        deadline = time.monotonic() + self.session_timeout_s * 2
        zk.ensure_path(znodes.BROKER_IDS_PATH)
        zk.ensure_path(znodes.TOPICS_PATH)
        while True:
            try:
                zk.create(path, self.registration.encode(), ephemeral=True)
                logger.info("registered %s", path)
                return
            except NodeExistsError:
                stat = zk.exists(path)
                if stat is not None and stat.ephemeralOwner == zk.client_id[0]:
                    return
                if time.monotonic() > deadline:
                    raise ZooKeeperError(
                        f"{path} is held by another live session: is broker id "
                        f"{self.registration.broker_id} already running?"
                    ) from None
                time.sleep(0.25)

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
                    await asyncio.to_thread(self._register, self.zk)
                self.apply_view(await asyncio.to_thread(read_cluster_view, self.zk))
            except Exception:
                logger.exception("refreshing the cluster view failed; retrying")
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


def _close(zk: KazooClient) -> None:
    zk.stop()
    zk.close()
