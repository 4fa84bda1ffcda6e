"""The transactions of one partition that are not yet stable, and its last stable offset.

A producer's first transactional batch on the partition opens its transaction there, at
that batch's first offset; the marker (a control batch) of the same producer ends it.
The last stable offset (LSO) is where read_committed readers stop: the first offset of
the earliest transaction still unstable, or the high watermark when none is below it.

A transaction whose marker is in the log stays unstable until the high watermark passes
the marker, as in Kafka (its ongoing and unreplicated transactions): a reader let past
the transaction's records before the marker is committed could read them from a leader
whose marker a new leader never had, and the transaction would then end (when the
coordinator writes the marker again) after its records were read as committed.

Pure logic, owned by the partition's producer state (producer_state.py): no I/O, no locks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from brokerd.log.transaction_index import AbortedTransaction


@dataclass(frozen=True, slots=True)
class CompletedTransaction:
    """One producer's transaction on the partition, ended by the marker at `last_offset`.

    `last_stable_offset` is the LSO the transactions alone allowed once it ended: the
    first offset of the earliest transaction still open then, or the offset after the
    marker. The aborted-transaction index keeps it to know when a search can stop.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int

    def as_aborted(self) -> AbortedTransaction:
        return AbortedTransaction(
            self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


class OpenTransactions:
    """Open transactions by producer id, and ended ones whose marker is not committed yet."""

    def __init__(self) -> None:
        self._first_offsets: dict[int, int] = {}
        self._unreplicated: deque[CompletedTransaction] = deque()

    def clear(self) -> None:
        self._first_offsets.clear()
        self._unreplicated.clear()

    def first_offset(self, producer_id: int) -> int | None:
        """Where `producer_id`'s open transaction began, or None if it has none open."""
        return self._first_offsets.get(producer_id)

    def open(self, producer_id: int, first_offset: int) -> None:
        """A transactional batch of `producer_id` is in the log from `first_offset`: it
        opens the producer's transaction, unless one is open already."""
        self._first_offsets.setdefault(producer_id, first_offset)

    def complete(
        self, producer_id: int, marker_offset: int, *, aborted: bool
    ) -> CompletedTransaction:
        """End `producer_id`'s transaction with the marker at `marker_offset`.

        A marker for a producer with nothing open here (the coordinator ends the
        transaction on every partition it added, written to or not) ends an empty
        transaction made of the marker alone, as in Kafka.
        """
        first = self._first_offsets.pop(producer_id, marker_offset)
        still_open = min(self._first_offsets.values(), default=marker_offset + 1)
        completed = CompletedTransaction(producer_id, first, marker_offset, aborted, still_open)
        self._unreplicated.append(completed)
        return completed

    def forget_replicated(self, high_watermark: int) -> None:
        """Drop the ended transactions whose marker lies below `high_watermark`."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO under `high_watermark`: where the first unstable transaction begins."""
        self.forget_replicated(high_watermark)
        if not self._first_offsets and not self._unreplicated:
            return high_watermark
        firsts = [*self._first_offsets.values(), *(t.first_offset for t in self._unreplicated)]
        return min(high_watermark, *firsts)

    def open_first_offsets(self) -> dict[int, int]:
        """The open transactions as producer id -> first offset."""
        return dict(self._first_offsets)
