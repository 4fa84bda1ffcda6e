"""A response that is decided but not yet due: what a handler returns once its ordered work
is done and only a wait is left.

An acks=all produce appends on the event loop, in the order the connection's requests
arrived, and then waits for the HW to pass its records. The wait orders nothing: while
it lasts the listener reads and handles the connection's next requests (a producer keeps
several batches in flight), and writes every answer in request order once it is ready
(brokerd/serving/answer_order.py). A handler says so by returning a Deferred holding the
rest of its work, instead of awaiting that work itself.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Deferred:
    """The rest of a handler: a coroutine that waits, then returns the response (None:
    none is sent), or raises as the handler would have."""

    rest: Coroutine[Any, Any, Any]
