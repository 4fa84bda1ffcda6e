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

Transactions: a transactional batch opens its producer's transaction at its first offset
(open_transactions.py keeps them and the last stable offset), and a control batch of the
producer (its marker, COMMIT or ABORT) ends it. Markers come from the transaction
coordinator, which stamps each with its own epoch; the latest one seen per producer is
kept, and a marker from an older coordinator is refused (Kafka's
TRANSACTION_COORDINATOR_FENCED), as is a marker from an older producer epoch. A producer
with a transaction open may not write outside it (INVALID_TXN_STATE), nor expire.
Snapshots carry each producer's coordinator epoch and open transaction's first offset
(Kafka's CurrentTxnFirstOffset), so a restart keeps the transactions open.

A Spark sink task writes under a derived producer id (DERIVED_PRODUCER_ID_BASE and up)
whose epoch serves one micro-batch; in a sink's transaction, once its marker ended the
transaction here, a later transactional batch of that id and epoch can only come from a
zombie attempt of the task, and would open a transaction no coordinator will ever end
(holding the LSO for good). It is refused as fenced (INVALID_PRODUCER_EPOCH: the sink
reads a fence as "already written") unless it repeats a batch by its sequences, answered
as a duplicate as any. Allocated ids (Kafka's producers) reuse their epoch across
transactions and are unaffected. Snapshots (version 4) keep the epoch of each producer's
latest marker for it.

A run of markers (one coordinator request's markers for this partition, a Spark sink's
transaction ending for each of its producers) is appended in one append, ordered by
`plan_markers`: by descending first offset of each producer's open transaction, so that
the transaction that began first ends last. Whatever prefix of the run a replica holds,
the LSO stays at or below the first record of every transaction of the run still open
there, and those that ended all began later than that: none of the run's records is
visible under read_committed before the whole run is, on this partition.

Pure logic, no I/O and no locking: the owning Partition runs on the broker's loop.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from brokerd.replication.open_transactions import CompletedTransaction, OpenTransactions
from spark_replica.errors import InvalidControlRecordError, ProtocolError
from spark_replica.records import (
    DERIVED_PRODUCER_ID_BASE,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    ControlMarker,
    ControlType,
)

MAX_BATCHES_PER_PRODUCER = 5
MAX_SEQUENCE = 2**31 - 1
SEQUENCE_SPACE = MAX_SEQUENCE + 1
# Of two sequences less than half the space apart, the one the other reaches by counting
# up is the later: the ordering that stays meaningful across the wrap.
HALF_SEQUENCE_SPACE = SEQUENCE_SPACE // 2
SNAPSHOT_MAGIC = "replog-producer-state"
# 2: each producer line carries its last batch timestamp; 3: and its coordinator epoch
# and open transaction's first offset (-1: none), and may hold no batch (a producer known
# only from a marker); 4: and the epoch of its latest marker (-1: none).
SNAPSHOT_VERSION = 4
READABLE_SNAPSHOT_VERSIONS = (2, 3, 4)
BATCH_FIELDS = 4  # base sequence, last sequence, base offset, last offset
# Where each version's producer line's batches begin, and the fewest fields it has.
_LINE_LAYOUTS = {2: (3, 3 + BATCH_FIELDS), 3: (5, 5), 4: (6, 6)}
NO_COORDINATOR_EPOCH = -1
NO_MARKER_EPOCH = -1
NO_TXN_OFFSET = -1
# Where a marker of a producer with no open transaction sorts in a run: first.
_NO_OPEN_TXN = 2**63
# A batch's header and, for a control batch, the marker it holds: what a replay reads.
LoggedBatch = tuple[BatchHeader, ControlMarker | None]
# A marker to append: (producer id, producer epoch, coordinator epoch).
MarkerFor = tuple[int, int, int]


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
    COORDINATOR_FENCED = "coordinator_fenced"  # a marker from an older coordinator epoch
    INVALID_TXN_STATE = "invalid_txn_state"  # outside the producer's open transaction
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
    # The epoch of the coordinator that wrote this producer's latest marker.
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    # The producer epoch of its latest marker: a derived id's transaction at that epoch
    # has ended here, and a new one at the same epoch is a zombie's.
    marker_epoch: int = NO_MARKER_EPOCH


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """What the state knows of one producer: Kafka's DescribeProducers entry.

    `last_sequence` is that of its latest batch (-1: known only from a marker),
    `current_txn_start_offset` the first offset of its open transaction (-1: none).
    """

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class ProducerStateManager:
    """Per producer id: epoch and the last few batches, as the log's headers say."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._transactions = OpenTransactions()

    def snapshot(self) -> dict[int, tuple[int, list[BatchMetadata]]]:
        """The whole state as plain values, so two managers can be compared."""
        return {pid: (e.epoch, list(e.batches)) for pid, e in self._producers.items()}

    def open_transactions(self) -> dict[int, int]:
        """The open transactions as producer id -> first offset."""
        return self._transactions.open_first_offsets()

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer the state holds, by producer id: what DescribeProducers answers
        (Kafka's `activeProducers`: those not expired, with or without a transaction)."""
        open_txns = self._transactions.open_first_offsets()
        return [
            ActiveProducer(
                pid,
                entry.epoch,
                entry.batches[-1].last_sequence if entry.batches else NO_SEQUENCE,
                entry.last_timestamp,
                entry.coordinator_epoch,
                open_txns.get(pid, NO_TXN_OFFSET),
            )
            for pid, entry in sorted(self._producers.items())
        ]

    def coordinator_epoch(self, producer_id: int) -> int:
        """The coordinator epoch of the producer's latest marker, -1 if none is known."""
        entry = self._producers.get(producer_id)
        return NO_COORDINATOR_EPOCH if entry is None else entry.coordinator_epoch

    def next_sequence(self, producer_id: int, producer_epoch: int) -> int:
        """The base sequence the producer's next batch at `producer_epoch` must carry: a
        group coordinator writing a producer's transactional offsets numbers them on from
        the producer's batches in this partition."""
        entry = self._producers.get(producer_id)
        if entry is None or entry.epoch != producer_epoch or not entry.batches:
            return 0
        return increment_sequence(entry.batches[-1].last_sequence, 1)

    def last_stable_offset(self, high_watermark: int) -> int:
        """Where read_committed readers stop under `high_watermark` (open_transactions.py)."""
        return self._transactions.last_stable_offset(high_watermark)

    def forget_replicated(self, high_watermark: int) -> None:
        """The HW reached `high_watermark`: ended transactions below it are stable now."""
        self._transactions.forget_replicated(high_watermark)

    def plan_markers(self, markers: Sequence[MarkerFor]) -> list[tuple[int, Verdict]]:
        """Decide whether a leader may append a run of markers, each ending its producer's
        transaction, and in which order: indexes into `markers`, each with its verdict;
        changes nothing.

        Ordered by descending first offset of the producer's open transaction (markers of
        producers with none first: they end an empty one), stably, so one producer's
        markers keep their order. Each is checked as if those accepted before it were
        recorded. Once a marker that would end an open transaction is refused, a later
        one that would end another producer's is refused the same way (held back): it
        began earlier, and ending it first would let readers past the refused one's
        records' start into the run's.
        """
        open_firsts = self._transactions.open_first_offsets()
        order = sorted(
            range(len(markers)), key=lambda i: -open_firsts.get(markers[i][0], _NO_OPEN_TXN)
        )
        known = {
            pid: (entry.epoch, entry.coordinator_epoch) for pid, entry in self._producers.items()
        }
        still_open = set(open_firsts)
        blocker: tuple[int, Verdict] | None = None
        plan = []
        for index in order:
            pid, epoch, coordinator_epoch = markers[index]
            verdict = _marker_verdict(pid, epoch, coordinator_epoch, known.get(pid))
            ends_open = pid in still_open
            if verdict is APPEND and blocker is not None and ends_open and pid != blocker[0]:
                blocked_pid, refusal = blocker
                verdict = Verdict(
                    refusal.outcome,
                    f"marker for producer id {pid} held back: the marker before it in the "
                    f"run, for producer id {blocked_pid}, was refused ({refusal.reason})",
                )
            if verdict is APPEND:
                known[pid] = (epoch, coordinator_epoch)
                still_open.discard(pid)
                if blocker is not None and blocker[0] == pid:
                    blocker = None
            elif blocker is None and ends_open:
                blocker = (pid, verdict)
            plan.append((index, verdict))
        return plan

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
        if not header.is_transactional and self._transactions.first_offset(pid) is not None:
            return Verdict(
                Outcome.INVALID_TXN_STATE,
                f"producer id {pid} has a transaction open from offset "
                f"{self._transactions.first_offset(pid)} and sent a batch outside it",
            )
        last = last_sequence(header)
        for batch in entry.batches:
            if batch.base_sequence == header.base_sequence and batch.last_sequence == last:
                return Verdict(
                    Outcome.DUPLICATE,
                    base_offset=batch.base_offset,
                    last_offset=batch.last_offset,
                )
        old_duplicate = bool(entry.batches) and precedes(last, entry.batches[0].base_sequence)
        ended_here = self._transactions.first_offset(pid) is None
        if not old_duplicate and ended_here and _is_zombie(header, entry):
            return Verdict(
                Outcome.FENCED,
                f"producer id {pid} epoch {header.producer_epoch}: its transaction here ended "
                "with a marker, and a sink task's epoch serves one transaction",
            )
        expected = increment_sequence(entry.batches[-1].last_sequence, 1) if entry.batches else 0
        if header.base_sequence == expected:
            return APPEND
        if old_duplicate:
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

    def record(
        self,
        header: BatchHeader,
        base_offset: int,
        seen_ms: int = -1,
        marker: ControlMarker | None = None,
    ) -> CompletedTransaction | None:
        """Note that the batch of `header` is in the log from `base_offset`; for a control
        batch, whose `marker` it holds, return the transaction it ended.

        Not checked: the leader checked before appending, and a follower or a replay
        copies what a leader accepted. A new epoch starts a fresh window. `seen_ms` is
        the broker's clock when the batch arrived (or was replayed), -1 if unknown.
        """
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(pid)
        if entry is None or entry.epoch != header.producer_epoch:
            coordinator_epoch = NO_COORDINATOR_EPOCH if entry is None else entry.coordinator_epoch
            entry = self._producers[pid] = ProducerEntry(
                header.producer_epoch, coordinator_epoch=coordinator_epoch
            )
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp, seen_ms)
        if header.is_control:
            if marker is None:
                raise InvalidControlRecordError(
                    f"control batch at offset {base_offset} recorded without its marker"
                )
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.marker_epoch = header.producer_epoch
            return self._transactions.complete(
                pid, base_offset, aborted=marker.control_type is ControlType.ABORT
            )
        if header.is_transactional:
            self._transactions.open(pid, base_offset)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                base_offset,
                base_offset + header.last_offset_delta,
            )
        )
        return None

    def rebuild(self, batches: Iterable[LoggedBatch], seen_ms: int = -1) -> None:
        """Forget everything and replay the batches of a log, whose offsets are assigned."""
        self._producers.clear()
        self._transactions.clear()
        self.replay(batches, seen_ms)

    def replay(
        self, batches: Iterable[LoggedBatch], seen_ms: int = -1
    ) -> list[CompletedTransaction]:
        """Record `batches` (headers, with the marker of each control batch, from a log
        whose offsets are assigned) in order; return the transactions they ended.

        Given `seen_ms` (the time of the replay), replayed producers count as active
        then: a restart never makes a producer expire sooner, only later.
        """
        completed = []
        for header, marker in batches:
            ended = self.record(header, header.base_offset, seen_ms, marker)
            if ended is not None:
                completed.append(ended)
        return completed

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers that have not written for `expiration_ms`; return how many.

        Kafka's producer.id.expiration.ms: without it the state (and every snapshot)
        grows with each producer id a partition has ever seen. A forgotten producer's
        next batch is refused (UNKNOWN_PRODUCER_ID) unless it starts at sequence 0.
        """
        cutoff = now_ms - expiration_ms
        open_txns = self._transactions.open_first_offsets()
        expired = [
            pid
            for pid, e in self._producers.items()
            if e.last_timestamp < cutoff and pid not in open_txns
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def encode_snapshot(self) -> list[str]:
        """The whole state as text lines: a header line, a count, one line per producer.

        Each producer line is its id, epoch, last batch timestamp, coordinator epoch, open
        transaction's first offset (-1: none) and latest marker's epoch (-1: none), then
        four numbers per remembered batch: base sequence, last sequence, base offset, last
        offset, oldest first.
        Transactions ended but not yet committed are not kept, as in Kafka.
        """
        lines = [f"{SNAPSHOT_MAGIC} {SNAPSHOT_VERSION}", str(len(self._producers))]
        open_txns = self._transactions.open_first_offsets()
        for pid in sorted(self._producers):
            entry = self._producers[pid]
            txn_first_offset = open_txns.get(pid, NO_TXN_OFFSET)
            fields = [pid, entry.epoch, entry.last_timestamp, entry.coordinator_epoch]
            fields += [txn_first_offset, entry.marker_epoch]
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
        """Replace the state with what encode_snapshot wrote, in this version or the last.

        Raises ProtocolError if the lines are not a snapshot, leaving the state empty.
        """
        self._producers.clear()
        self._transactions.clear()
        version = _snapshot_version(lines[0] if lines else "")
        if version is None:
            raise ProtocolError(f"not a producer state snapshot (first line {lines[:1]!r})")
        try:
            count = int(lines[1])
            rows = [[int(field) for field in line.split()] for line in lines[2:]]
        except (IndexError, ValueError) as exc:
            raise ProtocolError(f"malformed producer state snapshot: {exc}") from exc
        if count != len(rows):
            raise ProtocolError(f"snapshot says {count} producers but holds {len(rows)}")
        restored: dict[int, ProducerEntry] = {}
        open_txns: dict[int, int] = {}
        # Version 2 lines lack the coordinator epoch and the transaction, and always name
        # a batch (only markers make a producer known without one); version 3 lines lack
        # the marker's epoch.
        lead, fewest = _LINE_LAYOUTS[version]
        for number, row in enumerate(rows, start=3):
            if len(row) < fewest or (len(row) - lead) % BATCH_FIELDS:
                raise ProtocolError(f"snapshot line {number} has {len(row)} fields")
            batches = [
                BatchMetadata(*row[start : start + BATCH_FIELDS])
                for start in range(lead, len(row), BATCH_FIELDS)
            ]
            pid, epoch, last_timestamp = row[:3]
            coordinator_epoch, txn_first_offset = row[3:5] if version > 2 else (-1, -1)
            marker_epoch = row[5] if version > 3 else NO_MARKER_EPOCH
            restored[pid] = ProducerEntry(
                epoch,
                deque(batches, maxlen=MAX_BATCHES_PER_PRODUCER),
                last_timestamp,
                coordinator_epoch,
                marker_epoch,
            )
            if txn_first_offset != NO_TXN_OFFSET:
                open_txns[pid] = txn_first_offset
        self._producers.update(restored)
        for pid, first_offset in open_txns.items():
            self._transactions.open(pid, first_offset)


def _is_zombie(header: BatchHeader, entry: ProducerEntry) -> bool:
    """A sink task's transactional batch at the epoch of its latest marker here (the
    caller checked that the epoch is the entry's and that no transaction is open)."""
    return (
        header.is_transactional
        and header.producer_id >= DERIVED_PRODUCER_ID_BASE
        and entry.marker_epoch == header.producer_epoch
    )


def _marker_verdict(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    known: tuple[int, int] | None,
) -> Verdict:
    """A marker's verdict given the producer's (epoch, coordinator epoch), if known."""
    if producer_id < 0 or producer_epoch < 0:
        return Verdict(
            Outcome.INVALID,
            f"a transaction marker needs a producer id and epoch, not {producer_id} "
            f"and {producer_epoch}",
        )
    if known is None:
        return APPEND
    epoch, known_coordinator_epoch = known
    if producer_epoch < epoch:
        return Verdict(
            Outcome.FENCED,
            f"marker for producer id {producer_id} epoch {producer_epoch}, older than {epoch}",
        )
    if coordinator_epoch < known_coordinator_epoch:
        return Verdict(
            Outcome.COORDINATOR_FENCED,
            f"marker for producer id {producer_id} from coordinator epoch "
            f"{coordinator_epoch}, older than {known_coordinator_epoch}",
        )
    return APPEND


def _snapshot_version(first_line: str) -> int | None:
    """The version a snapshot's first line names, if it is one this code reads."""
    magic, _, version = first_line.partition(" ")
    if magic != SNAPSHOT_MAGIC or not version.isdigit():
        return None
    number = int(version)
    return number if number in READABLE_SNAPSHOT_VERSIONS else None
