"""The controller's ZooKeeper watches, set many at a time.

kazoo's ChildrenWatch and DataWatch recipes each wait for their first read before the
next can be set, so a new controller setting its seven cluster watches and one per topic
paid a round trip for each. Here every watch is a plain one-shot ZooKeeper watch, all of
them sent before any answer is waited for (one round trip), and each re-armed from its
own notification.

A watch is re-armed before the controller is told: the re-arming read travels on the
controller's session ahead of anything the event's handler reads afterwards, so a change
made between the notification and the re-arm is seen by that handler, and every later
change fires the watch again.

kazoo forgets every watch when its connection drops (it calls each with an event of type
NONE) and does not set them again on the next connection: its recipes do that for
themselves. So a WatchSet keeps the watches of one controllership and `rearm` sets them
all again; the controller calls it whenever its connection comes back, then looks at what
may have changed meanwhile (controller.py). A re-arm lost to another drop is made again
at the next connection. Each arming carries a token, and only the latest arming of a
watch acts on a notification, so re-arming never doubles the notifications.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, WatchedEvent

from spark_replica.zk.kazoo_errors import translated


@dataclass(frozen=True)
class Watch:
    """Tell the controller of every change of `path`: of its children (`children`), or of
    its existence and data; `wanted` says whether this controllership still wants it."""

    path: str
    children: bool
    notify: Callable[[], None]
    wanted: Callable[[], bool]
    # The deletion of a watched znode is not reported (its parent's children watch, or
    # the handler of its creation, covers it), only its return; a watch that
    # `ends_with_znode` (a topic's assignment) ends there instead.
    ends_with_znode: bool = False


class WatchSet:
    """The watches of one controllership; safe to use from kazoo's threads."""

    def __init__(self, zk: KazooClient) -> None:
        self._zk = zk
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._armed: dict[Watch, int] = {}  # each watch -> the token of its latest arming

    def add(self, watches: Sequence[Watch]) -> None:
        """Set every watch, in two round trips (blocking). A znode whose children are
        watched is made first where missing (only ever before the first controller: every
        broker makes the cluster's paths when it starts), which costs more."""
        parents = [w.path for w in watches if w.children]
        with translated():
            found = [self._zk.exists_async(path) for path in parents]
            for path, answer in zip(parents, found, strict=True):
                if answer.get() is None:
                    self._zk.ensure_path(path)
            armed = [self._arm(watch) for watch in watches]
            for answer in armed:
                answer.get()

    def rearm(self) -> None:
        """Set every watch again, not waiting for the answers (kazoo forgot them with the
        connection that dropped)."""
        with self._lock:
            watches = [w for w in self._armed if w.wanted()]
        for watch in watches:
            self._arm(watch)

    def _arm(self, watch: Watch) -> Any:
        with self._lock:
            token = self._armed[watch] = next(self._tokens)

        def fired(event: WatchedEvent) -> None:
            if event.type == EventType.NONE:
                return  # the connection dropped: `rearm` sets the watch again
            with self._lock:
                if self._armed.get(watch) != token:
                    return  # a later arming of this watch acts instead
                if not watch.wanted():
                    del self._armed[watch]
                    return
            if event.type != EventType.DELETED:
                self._arm(watch)
                watch.notify()
            elif watch.ends_with_znode:
                with self._lock:
                    self._armed.pop(watch, None)
            else:
                # Not a change to report, unless the znode was made again before the
                # watch was back: then the re-arming read is the only one that saw it.
                self._arm(watch).rawlink(_report_if_found)

        def _report_if_found(answer: Any) -> None:
            if answer.successful() and answer.get() is not None and watch.wanted():
                watch.notify()

        if watch.children:
            return self._zk.get_children_async(watch.path, watch=fired)
        return self._zk.exists_async(watch.path, watch=fired)
