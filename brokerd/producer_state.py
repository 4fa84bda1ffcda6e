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
SNAPSHOT_VERSION = 1
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

    def record(self, header: BatchHeader, base_offset: int) -> None:
        """Note that the batch of `header` is in the log from `base_offset`.

        Not checked: the leader checked before appending, and a follower or a replay
        copies what a leader accepted. A new epoch starts a fresh window.
        """
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self._producers.get(pid)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self._producers[pid] = ProducerEntry(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                base_offset,
                base_offset + header.last_offset_delta,
            )
        )

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Forget everything and replay the headers of a log, whose offsets are assigned."""
        self._producers.clear()
        self.replay(headers)

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Record the batches of `headers` (from a log, offsets assigned), in order."""
        for header in headers:
            self.record(header, header.base_offset)

    def encode_snapshot(self) -> list[str]:
        """The whole state as text lines: a header line, a count, one line per producer.

        Each producer line is its id and epoch, then four numbers per remembered batch:
        base sequence, last sequence, base offset, last offset, oldest batch first.
        """
        lines = [f"{SNAPSHOT_MAGIC} {SNAPSHOT_VERSION}", str(len(self._producers))]
        for pid in sorted(self._producers):
            entry = self._producers[pid]
            fields = [pid, entry.epoch]
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
            if len(row) < 2 + BATCH_FIELDS or (len(row) - 2) % BATCH_FIELDS:
                raise ProtocolError(f"snapshot line {number} has {len(row)} fields")
            batches = [
                BatchMetadata(*row[start : start + BATCH_FIELDS])
                for start in range(2, len(row), BATCH_FIELDS)
            ]
            restored[row[0]] = ProducerEntry(
                row[1], deque(batches, maxlen=MAX_BATCHES_PER_PRODUCER)
            )
        self._producers.update(restored)
