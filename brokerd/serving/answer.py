"""What the broker writes back for one request frame: the type both dialects, the dispatch
and the server share."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from spark_replica.wire.primitives import Chunk


@dataclass
class Answer:
    """What to write back for one frame, and whether the connection ends after it (and
    how long to wait first: failed logins are answered slowly). An answer that is not
    ready yet is `later`: the task that makes it (brokerd/serving/answer_order.py)."""

    buffers: Sequence[Chunk] | None
    close_after_s: float | None = None
    later: asyncio.Future[Answer] | None = None


# Close the connection at once, answering nothing.
CLOSE = Answer(None, 0.0)
