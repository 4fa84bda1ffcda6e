"""Idempotent-producer state of one partition: what each producer id last appended.

A producer stamps every batch with its producer id, epoch and the sequence number of
the batch's first record (counting per partition from 0). The leader keeps, per
producer id, the epoch and the last MAX_BATCHES_PER_PRODUCER batches it appended, so it
can tell a retry of one of them (answer the original offsets, append nothing) from the
next batch in order (append) and from a gap (refuse). Five is Kafka's limit on a
producer's in-flight requests per connection: a retry can only be of one of the last
five batches, so their offsets are all a retry can need. A batch wholly before those
five repeats records appended long ago (a Spark task replaying its batches after a
retry, with the same producer id and epoch): it is refused as a duplicate whose offsets
are no longer known (DUPLICATE_SEQUENCE_NUMBER), never appended twice.

The log is the source of truth: this state is a summary of its batch headers, so it is
rebuilt by replaying them (after a restart or a truncation) and followers update it as
they copy batches, ready for when they become leader. Retention deletes old batches but
must not make their producers unknown, so the state is also written as a snapshot (see
`encode_snapshot`) when a segment rolls; a rebuild starts from the newest snapshot and
replays only the headers after it.

Sequence numbers wrap from 2**31 - 1 back to 0, as in Kafka.

Pure logic, no I/O and no locking: the owning Partition runs on the broker's loop.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from spark_replica.errors import ProtocolError
from spark_replica.records import NO_PRODUCER_ID, BatchHeader

MAX_BATCHES_PER_PRODUCER = 5
MAX_SEQUENCE = 2**31 - 1
SEQUENCE_SPACE = MAX_SEQUENCE + 1
# Of two sequences less than half the space apart, the one the other reaches by counting
# up is the later: the ordering that stays meaningful across the wrap.
HALF_SEQUENCE_SPACE = SEQUENCE_SPACE // 2
SNAPSHOT_MAGIC = "replog-producer-state"
SNAPSHOT_VERSION = 2  # 2: each producer line carries its last batch timestamp
BATCH_FIELDS = 4  # base sequence, last sequence, base offset, last offset


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past MAX_SEQUENCE to 0 like Kafka."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


def precedes(earlier: int, later: int) -> bool:
    """True if sequence `earlier` comes strictly before `later`, allowing for the wrap."""
    return 0 < (later - earlier) % SEQUENCE_SPACE < HALF_SEQUENCE_SPACE


def last_sequence(header: BatchHeader) -> int:
    """Sequence number of the last record of `header`'s batch."""
    return increment_sequence(header.base_sequence, header.record_count - 1)


class Outcome(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"  # a retry of a batch already in the log
    OLD_DUPLICATE = "old_duplicate"  # repeats sequences from before the remembered batches
    OUT_OF_ORDER = "out_of_order"  # a gap, or a new epoch not starting at 0
    FENCED = "fenced"  # an epoch older than the producer's latest
    UNKNOWN_PRODUCER = "unknown_producer"  # no state for this id and not its first batch
    INVALID = "invalid"  # a producer id without a valid epoch or sequence


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one batch.

    For DUPLICATE, the offsets it was first appended at; for OLD_DUPLICATE, only
    `last_offset`: the offset below the remembered batches, at or before which it lies.
    """

    outcome: Outcome
    reason: str = ""
    base_offset: int = -1
    last_offset: int = -1


APPEND = Verdict(Outcome.APPEND)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence and offset range of one appended batch."""

    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer id's epoch and its latest batches, oldest first."""

    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    # When the producer last wrote, ms: the later of its batches' timestamps and the
    # broker's clock when it took them (a producer writing old timestamps, say a
    # reprocessing job, must not look idle). What expiry goes by.
    last_timestamp: int = -1


class ProducerStateManager:
    """Per producer id: epoch and the last few batches, as the log's headers say."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def snapshot(self) -> dict[int, tuple[int, list[BatchMetadata]]]:
        """The whole state as plain values, so two managers can be compared."""
        return {pid: (e.epoch, list(e.batches)) for pid, e in self._producers.items()}

    def check(self, header: BatchHeader) -> Verdict:
        """Decide whether a leader may append the batch of `header`; changes nothing."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return APPEND
        if pid < 0 or header.producer_epoch < 0 or header.base_sequence < 0:
            return Verdict(
                Outcome.INVALID,
                f"producer id {pid} needs a non-negative producer id, epoch and base sequence "
                f"(got epoch {header.producer_epoch}, base sequence {header.base_sequence})",
            )
        entry = self._producers.get(pid)
        if entry is None:
            if header.base_sequence == 0:
                return APPEND
            return Verdict(
                Outcome.UNKNOWN_PRODUCER,
                f"no state for producer id {pid} and its batch starts at sequence "
                f"{header.base_sequence}, not 0 (its earlier batches may have been deleted)",
            )
        if header.producer_epoch < entry.epoch:
            return Verdict(
                Outcome.FENCED,
                f"producer id {pid} epoch {header.producer_epoch} is older than {entry.epoch}",
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence == 0:
                return APPEND
            return Verdict(
                Outcome.OUT_OF_ORDER,
                f"producer id {pid} new epoch {header.producer_epoch} must start at "
                f"sequence 0, not {header.base_sequence}",
            )
        last = last_sequence(header)
        for batch in entry.batches:
            if batch.base_sequence == header.base_sequence and batch.last_sequence == last:
                return Verdict(
                    Outcome.DUPLICATE,
                    base_offset=batch.base_offset,
                    last_offset=batch.last_offset,
                )
        expected = increment_sequence(entry.batches[-1].last_sequence, 1) if entry.batches else 0
        if header.base_sequence == expected:
            return APPEND
        if entry.batches and precedes(last, entry.batches[0].base_sequence):
            return Verdict(
                Outcome.OLD_DUPLICATE,
                f"producer id {pid} epoch {entry.epoch}: sequences {header.base_sequence}.."
                f"{last} were appended before the {len(entry.batches)} batches remembered "
                f"(from sequence {entry.batches[0].base_sequence})",
                last_offset=entry.batches[0].base_offset - 1,
            )
        # A gap, a batch straddling the last sequence, or one that overlaps a remembered
        # batch without being it: the producer's numbering is not ours.
        return Verdict(
            Outcome.OUT_OF_ORDER,
            f"producer id {pid} epoch {entry.epoch}: expected sequence {expected}, "
            f"got {header.base_sequence}",
        )

    def record(self, header: BatchHeader, base_offset: int, seen_ms: int = -1) -> None:
        """Note that the batch of `header` is in the log from `base_offset`.

        Not checked: the leader checked before appending, and a follower or a replay
        copies what a leader accepted. A new epoch starts a fresh window. `seen_ms` is
        the broker's clock when the batch arrived (or was replayed), -1 if unknown.
        """
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self._producers.get(pid)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self._producers[pid] = ProducerEntry(header.producer_epoch)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp, seen_ms)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                base_offset,
                base_offset + header.last_offset_delta,
            )
        )

    def rebuild(self, headers: Iterable[BatchHeader], seen_ms: int = -1) -> None:
        """Forget everything and replay the headers of a log, whose offsets are assigned."""
        self._producers.clear()
        self.replay(headers, seen_ms)

    def replay(self, headers: Iterable[BatchHeader], seen_ms: int = -1) -> None:
        """Record the batches of `headers` (from a log, offsets assigned), in order.

        Given `seen_ms` (the time of the replay), replayed producers count as active
        then: a restart never makes a producer expire sooner, only later.
        """
        for header in headers:
            self.record(header, header.base_offset, seen_ms)

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers that have not written for `expiration_ms`; return how many.

        Kafka's producer.id.expiration.ms: without it the state (and every snapshot)
        grows with each producer id a partition has ever seen. A forgotten producer's
        next batch is refused (UNKNOWN_PRODUCER_ID) unless it starts at sequence 0.
        """
        cutoff = now_ms - expiration_ms
        expired = [pid for pid, e in self._producers.items() if e.last_timestamp < cutoff]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def encode_snapshot(self) -> list[str]:
        """The whole state as text lines: a header line, a count, one line per producer.

        Each producer line is its id, epoch and last batch timestamp, then four numbers
        per remembered batch: base sequence, last sequence, base offset, last offset,
        oldest batch first.
        """
        lines = [f"{SNAPSHOT_MAGIC} {SNAPSHOT_VERSION}", str(len(self._producers))]
        for pid in sorted(self._producers):
            entry = self._producers[pid]
            fields = [pid, entry.epoch, entry.last_timestamp]
            for batch in entry.batches:
                fields += [
                    batch.base_sequence,
                    batch.last_sequence,
                    batch.base_offset,
                    batch.last_offset,
                ]
            lines.append(" ".join(map(str, fields)))
        return lines

    def restore(self, lines: list[str]) -> None:
        """Replace the state with what encode_snapshot wrote.

        Raises ProtocolError if the lines are not a snapshot, leaving the state empty.
        """
        self._producers.clear()
        if not lines or lines[0] != f"{SNAPSHOT_MAGIC} {SNAPSHOT_VERSION}":
            raise ProtocolError(f"not a producer state snapshot (first line {lines[:1]!r})")
        try:
            count = int(lines[1])
            rows = [[int(field) for field in line.split()] for line in lines[2:]]
        except (IndexError, ValueError) as exc:
            raise ProtocolError(f"malformed producer state snapshot: {exc}") from exc
        if count != len(rows):
            raise ProtocolError(f"snapshot says {count} producers but holds {len(rows)}")
        restored: dict[int, ProducerEntry] = {}
        for number, row in enumerate(rows, start=3):
            if len(row) < 3 + BATCH_FIELDS or (len(row) - 3) % BATCH_FIELDS:
                raise ProtocolError(f"snapshot line {number} has {len(row)} fields")
            batches = [
                BatchMetadata(*row[start : start + BATCH_FIELDS])
                for start in range(3, len(row), BATCH_FIELDS)
            ]
            restored[row[0]] = ProducerEntry(
                row[1], deque(batches, maxlen=MAX_BATCHES_PER_PRODUCER), row[2]
            )
        self._producers.update(restored)
