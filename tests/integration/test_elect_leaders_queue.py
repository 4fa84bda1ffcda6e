"""`replog elect-leaders` while another election is still in ZooKeeper: it waits for that
one to finish, then writes its own, instead of failing a command the user can only run
again (two runs at once used to fail one of them). A real ZooKeeper, no controller: the
test removes the first request itself, as the controller would when done."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kazoo.client import KazooClient

from spark_replica.errors import ElectionInProgressError
from spark_replica.tools.cli import elect_leaders
from spark_replica.zk import topic_store, znodes

EARLIER = [("earlier", 0)]
OURS = [("ours", 0), ("ours", 1)]


def stored_election(zk: KazooClient) -> list[tuple[str, int]]:
    data, _ = zk.get(znodes.PREFERRED_REPLICA_ELECTION_PATH)
    return znodes.PreferredReplicaElection.decode(data).partitions


def test_a_request_waits_for_the_election_in_progress_then_is_written(zk: KazooClient) -> None:
    topic_store.request_preferred_election(zk, EARLIER)
    controller_done = threading.Timer(
        0.5, zk.delete, args=(znodes.PREFERRED_REPLICA_ELECTION_PATH,)
    )
    controller_done.start()
    try:
        asyncio.run(elect_leaders.request_when_free(zk, OURS))
    finally:
        controller_done.cancel()
    assert stored_election(zk) == OURS


def test_an_election_that_never_finishes_is_reported_as_in_progress(
    zk: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(elect_leaders, "WAIT_S", 0.3)
    topic_store.request_preferred_election(zk, EARLIER)
    with pytest.raises(ElectionInProgressError, match="already in progress"):
        asyncio.run(elect_leaders.request_when_free(zk, OURS))
    assert stored_election(zk) == EARLIER
