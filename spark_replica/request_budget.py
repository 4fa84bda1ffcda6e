"""The bytes of requests a server holds, shared by its connections: pure bookkeeping.

Used by spark_replica/transport.py, which charges it as frames arrive and releases it as
they are handled; nothing here touches a socket, so its rules are tested with plain
numbers.
"""

from __future__ import annotations

from collections.abc import Callable


class RequestBudget:
    """Bytes of frames received and not yet released, shared by the connections of a server.

    Owned by the event loop's thread. Whole frames are taken with `try_take`; a frame
    still arriving is charged step by step with `try_take_part`, then `complete_part`
    once whole (its bytes stay taken until released) or `drop_part` if it never will be.
    A connection that cannot take waits, not reading, until some bytes are released.

    The rule that keeps partial frames from deadlocking: the bytes charged to arriving
    frames plus the smallest remaining need among them never exceed the limit. Whole
    frames are always released once handled, so that frame can always finish, release,
    and let the next one finish.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._partial_used = 0  # of `used`: charged to frames still arriving
        self._still_needed: dict[object, int] = {}  # an arriving frame -> bytes it lacks
        self._waiting: dict[Callable[[], None], None] = {}  # an ordered set

    def try_take(self, size: int) -> bool:
        """Take the bytes of a frame that has arrived whole."""
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def try_take_part(self, owner: object, size: int, still_needed_after: int) -> bool:
        """Charge `size` more bytes to `owner`'s arriving frame, which then lacks
        `still_needed_after`; False (nothing taken) if the budget or the rule forbids it."""
        if self.used + size > self.limit:
            return False
        smallest_need = still_needed_after
        for other, needed in self._still_needed.items():
            if other is not owner and needed < smallest_need:
                smallest_need = needed
        if self._partial_used + size + smallest_need > self.limit:
            return False
        self.used += size
        self._partial_used += size
        self._still_needed[owner] = still_needed_after
        return True

    def complete_part(self, owner: object, charged: int) -> None:
        """`owner`'s frame has arrived whole: its `charged` bytes stay taken, as a whole
        frame's, until released."""
        self._still_needed.pop(owner, None)
        self._partial_used -= charged

    def drop_part(self, owner: object, charged: int) -> None:
        """`owner`'s frame will never arrive whole: give back what it was charged."""
        self._still_needed.pop(owner, None)
        self._partial_used -= charged
        self.release(charged)

    def release(self, size: int) -> None:
        """Give bytes back; every waiting connection tries again, oldest first."""
        self.used -= size
        waiting = list(self._waiting)
        self._waiting.clear()
        for retry in waiting:
            retry()

    def wait(self, retry: Callable[[], None]) -> None:
        self._waiting[retry] = None

    def stop_waiting(self, retry: Callable[[], None]) -> None:
        self._waiting.pop(retry, None)
