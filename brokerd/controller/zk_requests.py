"""Counting the controller's ZooKeeper requests and round trips, per event.

The cost of a control-plane event on a large cluster is the number of times the
controller waits for ZooKeeper, not the number of requests: requests sent before the
sender waits for any answer travel together (kazoo pipelines them on one connection), so
a batch of async reads waited for together is one round trip. RequestTally is that rule
as plain arithmetic: a request sent after its sender waited for an answer starts a new
round trip. It counts how the code waits, not how fast ZooKeeper answered, so the same
work gives the same count on an idle machine and on a busy one.

The controller shares its kazoo session with the rest of the broker, so requests are
counted only where a tally is active (`counting()`, a ContextVar that asyncio.to_thread
carries into its worker thread): the broker's own ZooKeeper work on the same session is
not charged to the controller. Requests are seen at kazoo's single entry point for
requests (KazooClient._call), and waits at their answers' `get` and `wait`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from kazoo.client import KazooClient


class RequestTally:
    """Requests and round trips of one piece of work; safe to share between threads."""

    def __init__(self) -> None:
        self.requests = 0
        self.round_trips = 0
        self._waited = True
        self._lock = threading.Lock()

    def sent(self) -> None:
        """Count a request; the first since a wait starts a round trip."""
        with self._lock:
            if self._waited:
                self.round_trips += 1
                self._waited = False
            self.requests += 1

    def waited(self) -> None:
        """The sender waits for an answer: what it sends next is another round trip."""
        with self._lock:
            self._waited = True


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
            tally.sent()
            _report_waits(async_object, tally, threading.get_ident())
        return send(request, async_object)

    zk._call = counted  # type: ignore[method-assign]
    setattr(zk, _INSTALLED, True)


def _report_waits(answer: Any, tally: RequestTally, sender: int) -> None:
    """Count the sending thread's waits for `answer`. kazoo's own completions (a create's
    result is read by kazoo's callback thread, at whatever moment it arrives) are not
    the sender waiting, and counting them made the count depend on timing."""
    for name in ("get", "wait"):
        original: Callable[..., Any] = getattr(answer, name)

        def waiting(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            if threading.get_ident() == sender:
                tally.waited()
            return _original(*args, **kwargs)

        setattr(answer, name, waiting)


@contextlib.contextmanager
def counting() -> Iterator[RequestTally]:
    """Count the requests sent from this context (and threads started from it)."""
    tally = RequestTally()
    token = _active.set(tally)
    try:
        yield tally
    finally:
        _active.reset(token)
