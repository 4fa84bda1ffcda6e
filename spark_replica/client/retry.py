"""The client's one retry policy: how long to wait before retrying, pure and clock-free.

Everything in the client that retries (the producer's window, the consumer's fetches
and offset lookups, admin calls, the Spark connector through the client) asks this
policy how long to wait, so there is one backoff behaviour and one pair of settings,
Kafka's `retry.backoff.ms` and `retry.backoff.max.ms`.

The rules:

* An error whose `invalid_metadata` flag is set (NOT_LEADER, UNKNOWN_TOPIC_OR_PARTITION,
  FENCED_LEADER_EPOCH, a lost connection) means the request went to the wrong broker or
  to one that is gone. The caller refreshes its metadata first, and the first retry
  after it goes at once to the new leader: after a failover the controller has told
  every broker the new leader before a client can learn of it, so waiting only adds
  latency.
* Every other retry waits `backoff_s * 2**(n-1)`, capped at `max_backoff_s`, where `n`
  counts the retries that waited, the one about to happen included. An immediate
  first retry is thus followed by `backoff_s`, then twice that, and so on.

`RetryPolicy.delay_s` is the stateless form: from a retry's number and its error alone
it cannot know whether the first retry waited, so it assumes the earlier errors were of
the same kind as this one. `Attempts` follows one retrying operation and counts the
retries that waited exactly, and also keeps its deadline; its clock is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.client import request_log
from spark_replica.errors import ConfigError

# Past this many doublings every delay is capped anyway; it keeps 2**n a small number.
_MAX_DOUBLINGS = 32


def refreshes_metadata(error: BaseException | None) -> bool:
    """Whether `error` says the metadata that routed the request is stale."""
    return bool(getattr(error, "invalid_metadata", False))


def is_retriable(error: BaseException | None) -> bool:
    """Whether the client may send the request again after `error` (its `retriable` flag)."""
    return bool(getattr(error, "retriable", False))


@dataclass(frozen=True)
class RetryPolicy:
    backoff_s: float = 0.1  # Kafka's retry.backoff.ms
    max_backoff_s: float = 1.0  # Kafka's retry.backoff.max.ms

    def __post_init__(self) -> None:
        if self.backoff_s < 0:
            raise ConfigError(f"retry backoff must be 0 or more, not {self.backoff_s} s")
        if self.max_backoff_s < self.backoff_s:
            raise ConfigError(
                f"the maximum retry backoff ({self.max_backoff_s} s) is below the retry "
                f"backoff ({self.backoff_s} s)"
            )

    @classmethod
    def from_ms(cls, backoff_ms: int, max_backoff_ms: int | None = None) -> RetryPolicy:
        """From Kafka's settings in milliseconds; the maximum defaults to 1 s, or the
        backoff if that is longer."""
        backoff_s = backoff_ms / 1000
        if max_backoff_ms is None:
            return cls(backoff_s, max(backoff_s, cls.max_backoff_s))
        return cls(backoff_s, max_backoff_ms / 1000)

    def delay_s(self, attempt: int, error: BaseException | None) -> float:
        """Seconds to wait before retry `attempt` (1 = the first retry) after `error`.

        0 for the first retry after an error whose `invalid_metadata` is true: the
        caller refreshes metadata first and goes straight to the new leader. Otherwise
        the backoff of the n-th retry that waits, assuming earlier errors were of this
        one's kind (so after invalid-metadata errors the first retry did not wait).
        """
        if attempt < 1:
            raise ValueError(f"retries are numbered from 1, not {attempt}")
        if refreshes_metadata(error):
            return 0.0 if attempt == 1 else self.waiting_delay_s(attempt - 1)
        return self.waiting_delay_s(attempt)

    def waiting_delay_s(self, waited: int) -> float:
        """The delay of the `waited`-th retry that waits (1 = the first such)."""
        if waited < 1:
            raise ValueError(f"waiting retries are numbered from 1, not {waited}")
        doublings = min(waited - 1, _MAX_DOUBLINGS)
        return min(self.backoff_s * 2**doublings, self.max_backoff_s)


DEFAULT_RETRY_POLICY = RetryPolicy()


class Attempts:
    """One retrying operation: its retries so far and its deadline (clock passed in).

    `next_delay(error, now)` says how long to wait before the next retry, or None when
    the operation should give up: the error is not retriable, or the deadline has
    passed. A wait that would end past the deadline is shortened to it, so the last
    try happens at the deadline rather than not at all.
    """

    def __init__(self, policy: RetryPolicy, deadline: float) -> None:
        self.policy = policy
        self.deadline = deadline
        self.retries = 0
        self.waited = 0
        self.last_error: BaseException | None = None

    def next_delay(self, error: BaseException, now: float) -> float | None:
        """The wait before the next retry, or None to give up; each decision is one
        line of request_log (seen with `replog -v`)."""
        delay = self._decide(error, now)
        if delay is None:
            request_log.giving_up(error, self.retries)
        else:
            request_log.retrying(error, self.retries, delay)
        return delay

    def _decide(self, error: BaseException, now: float) -> float | None:
        self.last_error = error
        if not is_retriable(error) or now >= self.deadline:
            return None
        self.retries += 1
        if self.retries == 1 and refreshes_metadata(error):
            return 0.0
        self.waited += 1
        return min(self.policy.waiting_delay_s(self.waited), self.deadline - now)

    def succeeded(self) -> None:
        """The operation made progress: the next error starts the backoff afresh."""
        self.retries = 0
        self.waited = 0
        self.last_error = None
