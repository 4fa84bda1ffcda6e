"""The broker's ZooKeeper session: registration, and noticing partitions that go away.

kazoo runs watch callbacks and session listeners on its own threads; they only hand a
"something changed" signal to the event loop (call_soon_threadsafe). One refresher task
on the loop then reads the assignments in a worker thread and hands them to the broker,
coalescing bursts of changes into one read. Leadership does not come from here: it
comes from the controller's LeaderAndIsr requests.

The session's state (connected, suspended, lost) is reported as it changes to
`on_session_state`, with whether the loss was this broker's own doing (closing at
shutdown) rather than an expiry; the metrics count the expiries.

The registration is an ephemeral znode, so it disappears when the session ends. Its
czxid is this incarnation's broker epoch. After a lost session (expired, e.g. a long
pause) the broker registers again as soon as kazoo has a new session, with a new epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import ZnodeStat

from spark_replica.errors import ZnodeExistsError, ZooKeeperConnectionError, ZooKeeperError
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import translated
from spark_replica.zk.session import connect

CLUSTER_PATHS = (
    znodes.BROKER_IDS_PATH,
    znodes.TOPICS_PATH,
    znodes.ISR_CHANGE_NOTIFICATION_PATH,
    znodes.DELETE_TOPICS_PATH,
    znodes.CONFIG_CHANGES_PATH,
)

logger = logging.getLogger("brokerd.zk")

# Start-up waits this long (or twice the session timeout, if longer) for ZooKeeper to
# answer through lost connections and expired sessions; Kafka's
# zookeeper.connection.timeout.ms default. Past it the broker gives up and exits.
REGISTRATION_TIMEOUT_S = 18.0
REGISTRATION_RETRY_S = 0.25

T = TypeVar("T")


class ZooKeeperSync:
    def __init__(
        self,
        connect_string: str,
        registration: znodes.BrokerRegistration,
        on_assignments: Callable[[dict[TopicPartition, list[int]], int], None],
        marker: Callable[[], int],
        on_registered: Callable[[int], None],
        session_timeout_s: float,
        digest: str | None = None,
        on_session_state: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.connect_string = connect_string
        self.digest = digest
        self.registration = registration
        self.on_assignments = on_assignments
        self.marker = marker
        self.on_registered = on_registered
        self.session_timeout_s = session_timeout_s
        self.on_session_state = on_session_state
        self.zk: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._reregister = False
        self._refresher: asyncio.Task[None] | None = None
        # When kazoo last (re)connected, set from its listener thread (a float, so safe).
        self._connected_at = time.monotonic()

    async def connect(self) -> KazooClient:
        self._loop = asyncio.get_running_loop()
        zk = await asyncio.to_thread(
            connect,
            self.connect_string,
            session_timeout_s=self.session_timeout_s,
            digest=self.digest,
        )
        self.zk = zk
        zk.add_listener(self._on_session_state)
        self._on_session_state(zk.state)
        return zk

    async def start(self) -> None:
        """Drop the logs of partitions no longer assigned here, register, follow changes.

        A lost connection or an expired session on the way is not the end: kazoo opens a
        new session by itself and each step is tried again on it (Kafka registers on
        whatever session it has). Past the deadline start-up fails and the session is
        closed, which also releases any thread still waiting on it, so that the process
        exits rather than running unregistered.
        """
        assert self.zk is not None
        zk = self.zk
        deadline = time.monotonic() + self._registration_timeout_s
        try:
            marker = self.marker()
            assignments = await self._until(deadline, "reading assignments", read_assignments, zk)
            self.on_assignments(assignments, marker)
            self.on_registered(await self._register(zk, deadline))
        except BaseException:
            await self.stop()
            raise
        self.zk.ChildrenWatch(znodes.TOPICS_PATH, self._on_children)
        self._refresher = asyncio.create_task(self._refresh_forever())

    @property
    def _registration_timeout_s(self) -> float:
        return max(self.session_timeout_s * 2, REGISTRATION_TIMEOUT_S)

    async def _apply_assignments(self) -> None:
        assert self.zk is not None
        marker = self.marker()
        self.on_assignments(await asyncio.to_thread(read_assignments, self.zk), marker)

    async def _until(
        self, deadline: float, what: str, step: Callable[[KazooClient], T], zk: KazooClient
    ) -> T:
        """Run a blocking ZooKeeper step in a thread, again after a lost connection or
        session, until it succeeds or `deadline` passes."""
        while True:
            remaining = deadline - time.monotonic()
            try:
                return await asyncio.wait_for(asyncio.to_thread(step, zk), max(remaining, 0))
            except TimeoutError:
                raise ZooKeeperError(f"{what}: ZooKeeper did not answer in time") from None
            except ZooKeeperConnectionError as exc:
                if time.monotonic() >= deadline:
                    raise ZooKeeperError(
                        f"{what}: ZooKeeper did not answer in time ({exc})"
                    ) from exc
                logger.warning("%s: %s; trying again", what, exc)
                await asyncio.sleep(REGISTRATION_RETRY_S)

    async def _register(self, zk: KazooClient, deadline: float) -> int:
        """Create our ephemeral znode (waiting out a previous session's); return its czxid.

        A previous session's znode goes when that session expires, a session timeout
        after ZooKeeper last heard from it. A ZooKeeper restart starts that timeout
        again, so the wait (two session timeouts) is counted from when the znode was
        first found held or from our latest (re)connection, whichever is later: time
        ZooKeeper was away must not use it up, or a broker restarted together with
        ZooKeeper would give up just before its old registration goes.
        """
        path = znodes.broker_path(self.registration.broker_id)
        held_since: float | None = None
        while True:
            czxid = await self._until(
                deadline,
                f"registering {path}",
                partial(self._try_to_register, deadline=deadline),
                zk,
            )
            if czxid is not None:
                logger.info("registered %s (broker epoch %d)", path, czxid)
                return czxid
            now = time.monotonic()
            held_since = now if held_since is None else held_since
            wait_until = max(held_since, self._connected_at) + self.session_timeout_s * 2
            if now > wait_until:
                raise ZooKeeperError(
                    f"{path} is held by another live session: is broker id "
                    f"{self.registration.broker_id} already running?"
                )
            deadline = max(deadline, wait_until)
            await asyncio.sleep(REGISTRATION_RETRY_S)

    def _try_to_register(self, zk: KazooClient, deadline: float) -> int | None:
        """Our registration's czxid, or None while another session holds the znode.

        Each call waits at most until `deadline` (a client that cannot reconnect would
        otherwise hold the thread forever); a request given up on may still be sent on
        a later session, which the next attempt then finds as its own or as taken.
        """
        path = znodes.broker_path(self.registration.broker_id)

        def wait(pending: IAsyncResult) -> object:
            return pending.get(timeout=max(deadline - time.monotonic(), 0.001))

        with translated():
            # The cluster's paths (as Kafka's brokers make its top-level paths): the
            # controller then only has to watch them. Sent together: one round trip.
            for made in [zk.ensure_path_async(p) for p in CLUSTER_PATHS]:
                wait(made)
        with contextlib.suppress(ZnodeExistsError), translated():
            wait(zk.create_async(path, self.registration.encode(), ephemeral=True))
        with translated():
            stat = wait(zk.exists_async(path))
        session = zk.client_id
        if not isinstance(stat, ZnodeStat) or session is None or stat.ephemeralOwner != session[0]:
            return None
        return stat.czxid

    def _on_children(self, children: list[str]) -> bool:
        self._signal()
        return True

    def _on_session_state(self, state: str) -> None:
        if self.on_session_state is not None:
            # self.zk is set to None just before the session is closed on purpose.
            self.on_session_state(state, self.zk is None)
        if state == KazooState.CONNECTED:
            self._connected_at = time.monotonic()
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
                    deadline = time.monotonic() + self._registration_timeout_s
                    try:
                        self.on_registered(await self._register(self.zk, deadline))
                    except Exception:
                        self._reregister = True
                        raise
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
    with translated():
        return topic_store.read_all_assignments(zk)


def _close(zk: KazooClient) -> None:
    zk.stop()
    zk.close()
