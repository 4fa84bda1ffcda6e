"""What a producer says when it gives up at its delivery timeout: pure, no I/O.

By then the records have been retried for the whole delivery timeout, and the raw error
of the last attempt ("NotEnoughReplicasError: t-0: ISR [1] is smaller than ...") is
neither the whole story nor phrased for the person reading it. The message says, in
order: which partition and how many records, how long was tried, the cause in words
with the broker's own details, and whether the records may have been stored anyway
(an attempt appended but not acknowledged, or whose answer was lost), since that
decides whether sending them again can make a second copy.
"""

from __future__ import annotations

from spark_replica import errors
from spark_replica.errors import DeliveryTimeoutError
from spark_replica.topics import TopicPartition

# The cause of a retriable failure in words, most specific class first.
CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (
        errors.NotEnoughReplicasAfterAppendError,
        "the in-sync replicas fell below min.insync.replicas after the leader appended the records",
    ),
    (errors.NotEnoughReplicasError, "not enough in-sync replicas"),
    (errors.RequestTimedOutError, "the in-sync replicas did not all acknowledge in time"),
    (errors.NotLeaderOrFollowerError, "no broker would lead the partition"),
    (errors.LeaderNotAvailableError, "the partition has no leader"),
    (errors.FencedLeaderEpochError, "the partition's leader kept changing"),
    (errors.UnknownLeaderEpochError, "the partition's leader kept changing"),
    (errors.UnknownTopicOrPartitionError, "the brokers do not know the partition"),
    (errors.ConnectionLostError, "the leader could not be reached"),
)


def cause_in_words(error: BaseException | None) -> str:
    """The cause of giving up, in words, with the error's own message as detail."""
    if error is None:
        return "still waiting behind earlier records of the partition"
    detail = str(error)
    for kind, words in CAUSES:
        if isinstance(error, kind):
            return f"{words} ({detail})" if detail else words
    return f"{type(error).__name__}: {detail}"


def delivery_timeout_error(
    tp: TopicPartition,
    record_count: int,
    delivery_timeout_ms: int,
    last_error: BaseException | None,
    *,
    maybe_stored: bool,
) -> DeliveryTimeoutError:
    """The error that fails records the producer gave up on at its delivery timeout."""
    noun = "record" if record_count == 1 else "records"
    if maybe_stored:
        fate = f"the {noun} may or may not be stored"
    else:
        fate = f"the {noun} {'was' if record_count == 1 else 'were'} not stored"
    message = (
        f"{tp}: {record_count} {noun} not delivered "
        f"within delivery_timeout_ms={delivery_timeout_ms} "
        f"({delivery_timeout_ms / 1000:g} s): {cause_in_words(last_error)}; {fate}"
    )
    error = DeliveryTimeoutError(message, last_error, maybe_stored=maybe_stored)
    error.__cause__ = last_error
    return error
