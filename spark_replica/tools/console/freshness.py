"""When each panel's data was read, and whether it may still be shown as live.

A console that keeps showing its last good read after the cluster went away shows a
dead cluster as healthy. So every panel (the brokers and controller, the topics, the
rates, one broker's metrics, ...) keeps a `Freshness`: when its data was last read, and
since when and why reading it has failed. A panel is stale when its last read failed,
when it was never read, or when no read has succeeded for longer than its maximum age
(a read that hangs fails no read, but ages). The page greys a stale panel and says why
instead of showing its data as current.

Pure: the caller passes the time (milliseconds since the epoch) in.
"""

from __future__ import annotations

from dataclasses import dataclass

NOT_READ_YET = "not read yet"


@dataclass
class Freshness:
    read_ms: int | None = None  # the last successful read
    failing_since_ms: int | None = None  # the first failed read after it
    reason: str | None = None  # what could not be reached, e.g. "ZooKeeper unreachable"
    detail: str | None = None  # the latest failure's error, on one line
    failures: int = 0  # failed reads in a row

    def succeeded(self, now_ms: int) -> None:
        self.read_ms = now_ms
        self.failing_since_ms = None
        self.reason = None
        self.detail = None
        self.failures = 0

    def failed(self, now_ms: int, reason: str, detail: str | None = None) -> None:
        if self.failing_since_ms is None:
            self.failing_since_ms = now_ms
        self.reason = reason
        self.detail = detail
        self.failures += 1

    def stale_since_ms(self, now_ms: int, max_age_ms: int) -> int | None:
        """When the panel's data stopped being current; None while it is."""
        if self.failing_since_ms is not None:
            return self.failing_since_ms
        if self.read_ms is None:
            return now_ms
        if now_ms - self.read_ms > max_age_ms:
            return self.read_ms + max_age_ms
        return None

    def as_json(self, now_ms: int, max_age_ms: int) -> dict[str, object]:
        since = self.stale_since_ms(now_ms, max_age_ms)
        reason = None
        if since is not None:
            if self.reason is not None:
                reason = self.reason
            elif self.read_ms is None:
                reason = NOT_READ_YET
            else:
                reason = f"no answer for over {max_age_ms / 1000:g} s"
        return {
            "read_ms": self.read_ms,
            "stale": since is not None,
            "stale_since_ms": since,
            "stale_reason": reason,
            "stale_detail": self.detail if since is not None else None,
            "failures": self.failures,
        }
