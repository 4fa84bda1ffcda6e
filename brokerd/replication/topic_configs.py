"""Following topic config changes: `/config/changes` tells, `/config/topics/T` holds.

`replog configs alter` writes a topic's new config and a sequential notification naming
it in one transaction. Every broker watches the notifications' parent; as in zk_sync, the
kazoo callback only signals the event loop. A task on the loop then reads the new
notifications and the named topics' configs in a worker thread, and applies them to the
local partitions on the loop, where the partitions live.

Start-up reads the configs of every topic hosted here, so partitions recovered from disk
(which LeaderAndIsr treats as known and sends no config for) get their topic's settings;
only notifications newer than those present at that moment are followed afterwards.

Brokers never delete notifications: several brokers purging the same znodes would only
race each other, and the controller is the one place that may age them out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kazoo.client import KazooClient

from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.errors import ReplogError, ZnodeMissingError, ZooKeeperError
from spark_replica.records import now_ms
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import translated

logger = logging.getLogger("brokerd.topic_configs")

NO_CHANGE = -1


def change_sequence(child: str) -> int | None:
    """`config_change_0000000042` -> 42; None for a znode that is not a notification."""
    prefix = znodes.CONFIG_CHANGE_PREFIX.rpartition("/")[2]
    number = child.removeprefix(prefix)
    return int(number) if child.startswith(prefix) and number.isdigit() else None


def newest_change(children: Iterable[str]) -> int:
    return max((s for s in map(change_sequence, children) if s is not None), default=NO_CHANGE)


def read_changed_topics(
    zk: KazooClient, children: list[str], after: int
) -> tuple[set[str] | None, int]:
    """The topics named by notifications newer than `after`, and the newest one seen.

    None instead of a set means a notification vanished before we read it, so which
    topic it named is unknown and every topic must be re-read (blocking).
    """
    newer = sorted((s, c) for c in children if (s := change_sequence(c)) is not None and s > after)
    topics: set[str] | None = set()
    for _, child in newer:
        path = znodes.config_change_path(child)
        try:
            with translated():
                data, _ = zk.get(path)
        except ZnodeMissingError:
            topics = None
            continue
        try:
            topic = znodes.ConfigChangeNotification.decode(path, data).topic
        except ZooKeeperError:
            logger.exception("ignoring an unreadable config change notification")
            continue
        if topics is not None and topic is not None:
            topics.add(topic)
    return topics, max((s for s, _ in newer), default=after)


def read_configs(zk: KazooClient, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each topic's config overrides from `/config/topics/T` (blocking)."""
    return {topic: topic_store.read_topic_config(zk, topic) for topic in topics}


class TopicConfigFollower:
    """Applies every topic config change to this broker's partitions while it runs."""

    def __init__(self, zk: KazooClient, replicas: ReplicaManager) -> None:
        self.zk = zk
        self.replicas = replicas
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._children: list[str] = []
        self._last_change = NO_CHANGE
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Apply the current configs of hosted topics, then follow notifications."""
        self._loop = asyncio.get_running_loop()
        zk = self.zk

        def snapshot() -> list[str]:
            with translated():
                zk.ensure_path(znodes.CONFIG_CHANGES_PATH)
                return zk.get_children(znodes.CONFIG_CHANGES_PATH)

        # Notifications listed here are covered by the full read that follows.
        self._last_change = newest_change(await asyncio.to_thread(snapshot))
        await self._apply(None)
        zk.ChildrenWatch(znodes.CONFIG_CHANGES_PATH, self._on_children)
        self._task = asyncio.create_task(self._follow_forever())

    def _on_children(self, children: list[str]) -> bool:
        """kazoo thread: keep the list for the loop and wake it; never touch partitions.

        Returning False (once stopped) tells kazoo to drop the watch.
        """
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        self._children = list(children)
        loop.call_soon_threadsafe(self._changed.set)
        return True

    async def _follow_forever(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                topics, newest = await asyncio.to_thread(
                    read_changed_topics, self.zk, self._children, self._last_change
                )
                await self._apply(topics)
                self._last_change = newest
            except Exception:
                logger.exception("following topic config changes failed; retrying")
                await asyncio.sleep(1)
                self._changed.set()

    async def _apply(self, topics: set[str] | None) -> None:
        """Re-read and apply the configs of `topics` (None: all) hosted here."""
        hosted = {tp.topic for tp in self.replicas.partitions}
        wanted = hosted if topics is None else hosted & topics
        if not wanted:
            return
        configs = await asyncio.to_thread(read_configs, self.zk, sorted(wanted))
        now = now_ms()
        for topic, config in configs.items():
            try:
                count = self.replicas.apply_topic_config(topic, config, now)
            except ReplogError:
                logger.exception("keeping the old config of %s: its new one is invalid", topic)
                continue
            logger.info("applied config %s to %d partition(s) of %s", config, count, topic)

    async def stop(self) -> None:
        """Stop following; the ChildrenWatch ends with its callback's next call."""
        self._loop = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
