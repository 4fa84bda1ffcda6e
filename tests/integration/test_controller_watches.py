"""The controller's self-re-arming ZooKeeper watches (brokerd/controller/watches.py), on a
real ZooKeeper: every change reported, many set in two round trips, set again after
kazoo forgot them with a dropped connection."""

from __future__ import annotations

import threading

from kazoo.client import KazooClient

from brokerd.controller import zk_requests
from brokerd.controller.watches import Watch, WatchSet
from tests.support import wait_until


class Calls:
    def __init__(self) -> None:
        self.count = 0
        self.wanted = True
        self._lock = threading.Lock()

    def notify(self) -> None:
        with self._lock:
            self.count += 1


def watch(path: str, calls: Calls, *, children: bool, ends_with_znode: bool = False) -> Watch:
    return Watch(path, children, calls.notify, lambda: calls.wanted, ends_with_znode)


def test_a_children_watch_reports_every_change_until_unwanted(counted_zk: KazooClient) -> None:
    calls = Calls()
    WatchSet(counted_zk).add([watch("/made/by/the/watch", calls, children=True)])
    assert counted_zk.exists("/made/by/the/watch") is not None and calls.count == 0
    for n in range(1, 4):
        counted_zk.create(f"/made/by/the/watch/{n}")
        wait_until(lambda n=n: calls.count == n, f"change {n} reported")
    calls.wanted = False
    counted_zk.create("/made/by/the/watch/4")
    counted_zk.create("/made/by/the/watch/5")  # no watch left to fire: nothing re-armed it
    counted_zk.sync("/")
    assert calls.count == 3


def test_a_znode_watch_reports_creations_and_writes_not_deletions(counted_zk: KazooClient) -> None:
    calls = Calls()
    WatchSet(counted_zk).add([watch("/admin/request", calls, children=False)])
    counted_zk.create("/admin/request", b"1", makepath=True)
    wait_until(lambda: calls.count == 1, "the creation reported")
    counted_zk.set("/admin/request", b"2")
    wait_until(lambda: calls.count == 2, "the write reported")
    counted_zk.delete("/admin/request")
    counted_zk.create("/admin/request", b"3")  # the deletion re-armed the watch without a report
    wait_until(lambda: calls.count == 3, "the creation after the deletion reported")


def test_a_watch_that_ends_with_its_znode_stops_there(counted_zk: KazooClient) -> None:
    calls = Calls()
    counted_zk.create("/topic", b"a")
    WatchSet(counted_zk).add([watch("/topic", calls, children=False, ends_with_znode=True)])
    counted_zk.set("/topic", b"b")
    wait_until(lambda: calls.count == 1, "the write reported")
    counted_zk.delete("/topic")
    counted_zk.create("/topic", b"again")
    counted_zk.sync("/")
    assert calls.count == 1


def test_many_watches_are_set_in_two_round_trips(counted_zk: KazooClient) -> None:
    calls = Calls()
    watches = [watch(f"/many/{i}", calls, children=i % 2 == 0) for i in range(200)]
    for i in range(0, 200, 2):
        counted_zk.ensure_path(f"/many/{i}")
    with zk_requests.counting() as tally:
        WatchSet(counted_zk).add(watches)
    assert tally.round_trips == 2
    counted_zk.create("/many/1")
    counted_zk.create("/many/0/child")
    wait_until(lambda: calls.count == 2, "both kinds fired")


def test_watches_set_again_after_kazoo_forgot_them_report_changes(
    counted_zk: KazooClient,
) -> None:
    """kazoo forgets every watch when its connection drops and does not set them again;
    the controller re-arms its WatchSet whenever the connection is back."""
    calls = Calls()
    watches = WatchSet(counted_zk)
    watches.add([watch("/dropped", calls, children=True)])
    counted_zk._reset_watchers()  # what kazoo does on a dropped connection
    counted_zk.create("/dropped/lost")  # no one to tell: kazoo forgot the watch
    counted_zk.sync("/")
    assert calls.count == 0
    watches.rearm()  # the connection is back
    watches.rearm()  # twice (another drop and reconnection): still one report per change
    counted_zk.sync("/")
    counted_zk.create("/dropped/seen")
    wait_until(lambda: calls.count == 1, "the change after the re-arm reported")
    counted_zk.create("/dropped/seen-too")
    wait_until(lambda: calls.count == 2, "the next change reported")
    counted_zk.sync("/")
    assert calls.count == 2
