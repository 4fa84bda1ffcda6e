"""The controller's ZooKeeper watches, set many at a time.

kazoo's ChildrenWatch and DataWatch recipes each wait for their first read before the
next can be set, so a new controller setting its seven cluster watches and one per topic
paid a round trip for each. Here every watch is a plain one-shot ZooKeeper watch, all of
them sent before any answer is waited for (one round trip), and each re-armed from its
own notification.

A watch is re-armed before the controller is told: the re-arming read travels on the
controller's session ahead of anything the event's handler reads afterwards, so a change
made between the notification and the re-arm is seen by that handler, and every later
change fires the watch again. kazoo sends its registered watches again after a
reconnection (SetWatches); what changed while the session was disconnected is looked at
again by the controller on reconnection (controller.py).
"""

from __future__ import annotations

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


def set_watches(zk: KazooClient, watches: Sequence[Watch]) -> None:
    """Set every watch, in two round trips (blocking). A znode whose children are
    watched is made first where missing (only ever before the first controller: every
    broker makes the cluster's paths when it starts), which costs more."""
    parents = [w.path for w in watches if w.children]
    with translated():
        found = [zk.exists_async(path) for path in parents]
        for path, answer in zip(parents, found, strict=True):
            if answer.get() is None:
                zk.ensure_path(path)
        armed = [_arm(zk, watch) for watch in watches]
        for answer in armed:
            answer.get()


def _arm(zk: KazooClient, watch: Watch) -> Any:
    def fired(event: WatchedEvent) -> None:
        if not watch.wanted():
            return
        if event.type != EventType.DELETED:
            _arm(zk, watch)
            watch.notify()
        elif not watch.ends_with_znode:
            # Not a change to report, unless the znode was made again before the watch
            # was back: then the re-arming read is the only one that saw it.
            _arm(zk, watch).rawlink(_report_if_found)

    def _report_if_found(answer: Any) -> None:
        if answer.successful() and answer.get() is not None and watch.wanted():
            watch.notify()

    if watch.children:
        return zk.get_children_async(watch.path, watch=fired)
    return zk.exists_async(watch.path, watch=fired)
