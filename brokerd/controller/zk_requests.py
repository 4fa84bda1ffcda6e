"""Counting the controller's ZooKeeper requests and round trips, per event.

The cost of a control-plane event on a large cluster is the number of times the
controller waits for ZooKeeper, not the number of requests: requests sent while earlier
ones are still unanswered travel together (kazoo pipelines them on one connection), so
a batch of async reads waited for together is one round trip. RequestTally is that rule
as pure arithmetic: a request sent when none of the tally's earlier requests is still
pending starts a new round trip.

The controller shares its kazoo session with the rest of the broker, so requests are
counted only where a tally is active (`counting()`, a ContextVar that asyncio.to_thread
carries into its worker thread): the broker's own ZooKeeper work on the same session is
not charged to the controller. Requests are seen at kazoo's single entry point for
requests (KazooClient._call); ZooKeeper answers a session's requests in order, so the
oldest pending request is always the first to be answered.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

from kazoo.client import KazooClient


class Pending(Protocol):
    def ready(self) -> bool: ...


class RequestTally:
    """Requests and round trips of one piece of work; safe to share between threads."""

    def __init__(self) -> None:
        self.requests = 0
        self.round_trips = 0
        self._pending: deque[Pending] = deque()
        self._lock = threading.Lock()

    def sent(self, answer: Pending) -> None:
        """Count a request whose answer will arrive in `answer`."""
        with self._lock:
            while self._pending and self._pending[0].ready():
                self._pending.popleft()
            if not self._pending:
                self.round_trips += 1
            self.requests += 1
            self._pending.append(answer)


_active: ContextVar[RequestTally | None] = ContextVar("zk_request_tally", default=None)
_INSTALLED = "_replog_counts_requests"


def install(zk: KazooClient) -> None:
    """Make `zk` report each request to the tally active where it is sent (once per client)."""
    send: Callable[[Any, Any], Any] | None = getattr(zk, "_call", None)
    if getattr(zk, _INSTALLED, False) or send is None:
        return  # a kazoo without that entry point: nothing is counted, nothing breaks

    def counted(request: Any, async_object: Any) -> Any:
        tally = _active.get()
        if tally is not None:
            tally.sent(async_object)
        return send(request, async_object)

    zk._call = counted  # type: ignore[method-assign]
    setattr(zk, _INSTALLED, True)


@contextlib.contextmanager
def counting() -> Iterator[RequestTally]:
    """Count the requests sent from this context (and threads started from it)."""
    tally = RequestTally()
    token = _active.set(tally)
    try:
        yield tally
    finally:
        _active.reset(token)
