"""The rules of leader/follower replication, as pure functions of plain values.

Everything that decides what is committed, who is in sync and where a follower cuts its
log lives here, so it can be tested with plain values and a model; `Partition` and the
replica fetcher hold the state and do the I/O. Nothing here reads a clock (time is an
argument), touches a file or awaits.

The rules:

1. Fetch offsets. A follower's fetch offset is its log end offset (LEO), but only once
   it lies within the leader's log, [log start, LEO]. One outside is answered
   OFFSET_OUT_OF_RANGE and is never recorded: it neither moves the follower's LEO nor
   makes it caught up nor brings it into the ISR.
2. Caught up. A follower is caught up at the time of a fetch from the leader's LEO or
   beyond; a fetch that reaches the LEO the leader had at the follower's previous fetch
   shows it was caught up at that previous fetch.
3. Maximal ISR. The high watermark (HW) is computed over the current ISR plus the
   members of an expansion being written; while a shrink is being written, over the
   current, larger, ISR. A replica is thus covered by the HW from the moment it is
   proposed, so it is never behind the HW once it joins.
4. High watermark. The smallest LEO over the maximal ISR (the leader's own included; a
   member whose LEO is not known yet holds it back). It never moves backwards.
5. ISR expansion. A follower outside the ISR joins once its LEO has reached the HW and
   the offset at which the leader's current epoch began (before that it may still hold
   records of an older epoch that this leader does not have).
6. ISR shrink. A follower in the ISR leaves when it has not been caught up for more than
   `replica.lag.time.max.ms`. The leader never leaves its own ISR.
7. acks=all. A produce waits until the HW passes its last offset. It is then answered
   success only if the maximal ISR the HW was computed over has at least
   min.insync.replicas members (each of them holds the batch); otherwise
   NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka does: the ISR shrank after the append.
8. Truncation by leader epoch (KIP-279). The follower asks the leader where the
   follower's latest epoch ended; the leader answers with the largest epoch it knows
   that is <= the one asked about, and that epoch's end offset. If the follower knows
   the answered epoch, it cuts at min(leader's end offset, its own end of that epoch,
   its LEO) and is done. If the largest epoch it knows <= the answered one is a smaller
   epoch, it cuts at min(that epoch's end, LEO) and asks again. If it knows no such epoch,
   every record it holds of a known epoch is of an epoch the leader never had (the
   leader answered the largest epoch it has at or below the follower's latest), so those
   go: it cuts at min(leader's end offset, where its earliest known epoch begins, LEO).
   Records below that, if any, carry no epoch the follower tracks (KIP-279's case of a
   log older than its epoch cache) and are kept up to the leader's end offset, not
   emptied. When the leader cannot answer at all, it cuts at its HW.
9. Followers' log starts (for DeleteRecords, Kafka's low watermark). A follower moves its
   log start up to the one each fetch answer carries, as far as its log reaches, before
   it sends its next fetch. So a follower's fetch from offset F, after an answer that
   carried log start S, shows its log start is at least min(S, F). That is read once
   per fetch, as it arrives: the leader may read a waiting fetch again, and each read's
   answer replaces the last. The low watermark is the lowest start over the ISR members
   the controller counts live. The fetch request does not carry the start as Kafka's
   does: that would take a new native Fetch version (versions are negotiated per
   connection now; this rule predates them and needs none).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from spark_replica.wire.native.offsets_for_leader_epoch import UNDEFINED_OFFSET

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerProgress:
    """What the leader knows of one follower, as of the follower's last valid fetch."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    # The leader's log start in its last answer to the follower, and the follower's own
    # as far as its fetches show it (rule 9).
    log_start_answered: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET


def fetch_offset_in_range(fetch_offset: int, log_start_offset: int, log_end_offset: int) -> bool:
    """Rule 1: only an offset within the leader's log may be taken as a follower's LEO."""
    return log_start_offset <= fetch_offset <= log_end_offset


def after_fetch(
    progress: FollowerProgress, fetch_offset: int, leader_end_offset: int, now_ms: int
) -> FollowerProgress:
    """Rule 2: the follower's progress once a valid fetch from `fetch_offset` arrived."""
    caught_up_ms = progress.last_caught_up_ms
    if fetch_offset >= leader_end_offset:
        caught_up_ms = now_ms
    elif fetch_offset >= progress.last_fetch_leader_end_offset >= 0:
        caught_up_ms = max(caught_up_ms, progress.last_fetch_ms)
    return replace(
        progress,
        log_end_offset=fetch_offset,
        last_caught_up_ms=caught_up_ms,
        last_fetch_leader_end_offset=leader_end_offset,
        last_fetch_ms=now_ms,
    )


def follower_log_start(progress: FollowerProgress, fetch_offset: int) -> int:
    """Rule 9: the follower's log start as a fetch from `fetch_offset` shows it."""
    if progress.log_start_answered == UNKNOWN_OFFSET:
        return progress.log_start_offset
    return max(progress.log_start_offset, min(progress.log_start_answered, fetch_offset))


def isr_low_watermark(
    leader_id: int,
    leader_log_start: int,
    followers: Mapping[int, FollowerProgress],
    isr: Iterable[int],
    live: Collection[int],
) -> int:
    """Rule 9: the lowest log start over the ISR members that are `live` (the leader's
    included), UNKNOWN_OFFSET while one's is not known yet. A member the controller no
    longer counts live is passed over, as Kafka's low watermark passes over dead brokers:
    it would hold every DeleteRecords until the ISR dropped it."""
    starts = [leader_log_start]
    for replica in isr:
        if replica != leader_id and replica in live:
            follower = followers.get(replica)
            starts.append(UNKNOWN_OFFSET if follower is None else follower.log_start_offset)
    return min(starts)


def maximal_isr(isr: Iterable[int], proposed_isr: Iterable[int] | None) -> list[int]:
    """Rule 3: the current ISR together with any member a pending change would add."""
    return sorted(set(isr).union(proposed_isr or ()))


def high_watermark(
    current: int,
    leader_id: int,
    leader_end_offset: int,
    follower_ends: Mapping[int, int],
    isr: Iterable[int],
) -> int:
    """Rule 4: the HW over `isr` (pass the maximal ISR), never below `current`."""
    ends = [leader_end_offset]
    ends += [follower_ends.get(r, UNKNOWN_OFFSET) for r in isr if r != leader_id]
    return max(current, min(ends))


def may_join_isr(
    follower_end_offset: int, high_watermark: int, leader_epoch_start_offset: int
) -> bool:
    """Rule 5: whether a follower outside the ISR has caught up enough to join it."""
    return follower_end_offset >= max(high_watermark, leader_epoch_start_offset)


def lagging_replicas(
    isr: Iterable[int],
    leader_id: int,
    followers: Mapping[int, FollowerProgress],
    now_ms: int,
    lag_max_ms: int,
) -> list[int]:
    """Rule 6: the ISR members to drop, those not caught up for more than `lag_max_ms`."""
    return [
        r
        for r in isr
        if r != leader_id
        and r in followers
        and now_ms - followers[r].last_caught_up_ms > lag_max_ms
    ]


class AckOutcome(enum.Enum):
    PENDING = "pending"
    COMMITTED = "committed"
    NOT_ENOUGH_REPLICAS = "not enough replicas after append"


def acks_all_outcome(
    last_offset: int, high_watermark: int, maximal_isr_size: int, min_insync_replicas: int
) -> AckOutcome:
    """Rule 7: how an acks=all produce of records up to `last_offset` stands now."""
    if high_watermark <= last_offset:
        return AckOutcome.PENDING
    if maximal_isr_size >= min_insync_replicas:
        return AckOutcome.COMMITTED
    return AckOutcome.NOT_ENOUGH_REPLICAS


@dataclass(frozen=True, slots=True)
class Truncation:
    """Where to cut; `complete` False means cut there, then ask the leader again."""

    offset: int
    complete: bool


def truncation_point(
    leader_epoch: int,
    leader_end_offset: int,
    local_epoch_end: tuple[int, int] | None,
    log_end_offset: int,
    high_watermark: int,
    *,
    tracked_from: int,
) -> Truncation:
    """Rule 8: the follower's cut, given the leader's (epoch, end offset) answer.

    `local_epoch_end` is the follower's largest epoch <= `leader_epoch` with the offset
    where it ends in the follower's log (the next epoch's start, or the LEO), or None
    when the follower knows no such epoch. `tracked_from` is where the follower's
    earliest known epoch begins (its LEO if it knows none).
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), complete=True)
    if local_epoch_end is None:
        return Truncation(min(leader_end_offset, tracked_from, log_end_offset), complete=True)
    local_epoch, local_end = local_epoch_end
    if local_epoch == leader_epoch:
        return Truncation(min(leader_end_offset, local_end, log_end_offset), complete=True)
    return Truncation(min(local_end, log_end_offset), complete=False)
