"""One replica of a topic-partition on this broker: its log, its role, its high watermark.

Concurrency: a Partition is owned by the broker's event loop; every method runs on that
loop and none blocks on the network, so no lock is needed. Disk writes happen inline
(page cache), as in Kafka's request threads. ISR changes are written to ZooKeeper by the
IsrWriter (isr_writer.py), off the loop; the Partition only proposes them
(`proposed_isr`) and applies the outcome.

As leader it tracks each follower's log end offset (LEO, the offset the follower fetches
from) and when it was last caught up, and keeps the high watermark (HW): consumers read
only below it and acks=all producers wait for it. The rules (which fetch offsets count,
the HW over the maximal ISR, when a follower joins or leaves the ISR, when an acks=all
produce is committed) are pure functions in replication_rules.py; this class holds the
state they apply to.

Idempotent producers: the partition owns a ProducerStateManager (producer_state.py), a
summary of the producer ids, epochs and sequences in its log. The leader checks each
idempotent batch against it before appending, answers a retried batch with the offsets
it was first given, and records what it appends; followers record what they copy, so a
new leader already knows the producers. The state is rebuilt on first use (not at
startup, so a broker with many partitions opens them quickly) and again after a
truncation: from the newest producer snapshot within the log plus the batch headers
after it, or from every header when there is no snapshot. The log writes a snapshot at
each roll and at close from `_producer_snapshot`; loading the state for a roll snapshot
costs one snapshot and the active segment's headers.

Transactions: the producer state also knows each producer's open transaction, from
which the partition's last stable offset follows (`last_stable_offset`). Markers are
appended only through `append_markers` (the transaction coordinator's path), which also
indexes aborted transactions; a follower does both for the markers it copies. When the
log recovered a segment holding markers, the state is loaded at once, not lazily, and
its replay rebuilds that segment's aborted-transaction index.

Waiting for a change: every change of the log, HW or role wakes the futures registered
with the partition (`wait_for_change`). One future can wait on any number of
partitions: a follower's fetch names thousands, and a task per partition for every
idle fetch cost a large part of a core. The waiter leaves every partition's set when the
wait ends, however it ends (change, timeout, cancellation). A follower's fetch waits
with `high_watermark=False`: a HW that moved is no reason to answer it (the follower
learns the HW from its next answer, as Kafka's do), and waking it for that cost every
acks=all append one more fetch round trip per follower.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from brokerd.log import AppendInfo, Log
from brokerd.log.producer_snapshots import read_snapshot, snapshot_offsets
from brokerd.replication.producer_state import Outcome, ProducerStateManager
from brokerd.replication.rules import (
    AckOutcome,
    FollowerProgress,
    acks_all_outcome,
    after_fetch,
    fetch_offset_in_range,
    follower_log_start,
    high_watermark,
    isr_low_watermark,
    lagging_replicas,
    maximal_isr,
    may_join_isr,
)
from spark_replica.errors import (
    BrokerResponseError,
    FencedLeaderEpochError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProtocolError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownLeaderEpochError,
    UnknownProducerIdError,
)
from spark_replica.file_region import FileRegion
from spark_replica.records import (
    NO_PRODUCER_ID,
    BatchHeader,
    ControlMarker,
    ControlType,
    build_control_batch,
    decode_control_marker,
    iter_batches,
    runs_within,
)
from spark_replica.records import now_ms as clock_ms
from spark_replica.topic_config import DEFAULT_COMPRESSION_TYPE, check_min_insync_fits
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.delete_records import DELETE_TO_HIGH_WATERMARK
from spark_replica.wire.native.fetch import NO_LEADER_EPOCH
from spark_replica.wire.native.produce import ACKS_ALL

logger = logging.getLogger("brokerd.partition")

NO_LEADER = -1
# How often a DeleteRecords waiting for its replicas looks again at which brokers are live.
LIVE_BROKERS_RECHECK_S = 0.2
# The error a leader answers for each refusing verdict of the producer state.
VERDICT_ERRORS: dict[Outcome, type[BrokerResponseError]] = {
    Outcome.OUT_OF_ORDER: OutOfOrderSequenceError,
    Outcome.FENCED: InvalidProducerEpochError,
    Outcome.UNKNOWN_PRODUCER: UnknownProducerIdError,
    Outcome.INVALID: InvalidRecordError,
    Outcome.COORDINATOR_FENCED: TransactionCoordinatorFencedError,
    Outcome.INVALID_TXN_STATE: InvalidTxnStateError,
}


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction to end on this partition: whose, how, and by which coordinator."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    control_type: ControlType


class Partition:
    def __init__(
        self, tp: TopicPartition, log: Log, local_broker_id: int, high_watermark: int = 0
    ) -> None:
        self.tp = tp
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        # Bumped each time this replica becomes the leader after not being it: while it
        # stays the same, no other replica has led (written) since, whatever the epoch.
        self.leadership_term = 0
        self.leader_epoch_start_offset = 0
        self.controller_epoch = -1
        self.zk_version = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.proposed_isr: list[int] | None = None
        self.followers: dict[int, FollowerProgress] = {}
        self.min_insync_replicas = 1
        self.compression_type = DEFAULT_COMPRESSION_TYPE  # what Kafka fetches are sent as
        self.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._change_waiters: set[asyncio.Future[bool]] = set()
        # Waits that a HW move alone does not end (followers' fetches).
        self._log_waiters: set[asyncio.Future[bool]] = set()
        self._producer_state = ProducerStateManager()
        self._producer_state_loaded = False
        log.set_producer_snapshot_source(self._producer_snapshot)
        if log.transaction_index_rebuild_from is not None:
            # Loaded now, not lazily: a read_committed fetch may come before anything else
            # loads it, and must find the aborted transactions indexed.
            self._load_producer_state()
            self._producer_state_loaded = True

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent-producer state, loaded on first use (snapshot + later headers)."""
        if not self._producer_state_loaded:
            self._load_producer_state()
            self._producer_state_loaded = True
        return self._producer_state

    def _load_producer_state(self) -> None:
        """Restore the newest readable snapshot within the log, then replay what follows.

        A snapshot outside [log start, log end] describes batches this log no longer
        has (the log deletes those, but a copy restored by hand may remain); an
        unreadable one is passed over for the one before it, the log being the truth.
        When the log has aborted-transaction indexes to rebuild, the replay starts at
        or before the first of them, and the transactions it sees aborted rebuild them.
        """
        log = self.log
        start = log.log_start_offset
        rebuild_from = log.transaction_index_rebuild_from
        newest = log.log_end_offset if rebuild_from is None else rebuild_from
        self._producer_state.rebuild([])
        for offset in reversed(snapshot_offsets(log.directory)):
            if not log.log_start_offset <= offset <= newest:
                continue
            try:
                self._producer_state.restore(read_snapshot(log.directory, offset))
            except (OSError, ProtocolError) as exc:
                logger.warning("%s: skipping producer snapshot at %d: %s", self.tp, offset, exc)
                continue
            start = offset
            break
        completed = self._producer_state.replay(log.iter_producer_batches(start), clock_ms())
        if rebuild_from is not None:
            log.rebuild_transaction_indexes(t.as_aborted() for t in completed if t.aborted)

    def _producer_snapshot(self, required: bool) -> list[str] | None:
        """The lines of a snapshot at the log end, for the log to write.

        At close (`required` False) a state never loaded is left alone: the snapshots
        and the log already say everything it would.
        """
        if not required and not self._producer_state_loaded:
            return None
        return self.producer_state.encode_snapshot()

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed reads stop: the first offset of the earliest transaction
        not yet stable (open, or ended by a marker not yet committed), or the HW.

        Followers keep the same producer state from the batches they copy, so a new
        leader answers the right one at once. Never below the log start, as in Kafka: a
        transaction whose first records retention or DeleteRecords removed holds readers
        there, not at an offset no read can start from.
        """
        unstable = self.producer_state.last_stable_offset(self.high_watermark)
        return max(unstable, self.log.log_start_offset)

    def make_leader(
        self,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        zk_version: int,
        controller_epoch: int,
        now_ms: int,
    ) -> None:
        """Take leadership at `leader_epoch` with the ISR the controller wrote."""
        if not self.is_leader:
            self.leadership_term += 1
        if not (self.is_leader and leader_epoch == self.leader_epoch):
            logger.debug("%s: leader at epoch %d, isr %s", self.tp, leader_epoch, isr)
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.epoch_cache.assign(leader_epoch, self.log.log_end_offset)
            self.followers = {
                r: FollowerProgress(last_caught_up_ms=now_ms)
                for r in replicas
                if r != self.local_broker_id
            }
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.zk_version = zk_version
        self.controller_epoch = controller_epoch
        self.proposed_isr = None
        self._maybe_advance_high_watermark()
        self._notify()

    def make_follower(
        self, leader_id: int, leader_epoch: int, replicas: list[int], controller_epoch: int
    ) -> bool:
        """Follow `leader_id`; True if this is a new leader or epoch (truncation needed)."""
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch
        if changed:
            logger.debug("%s: follower of %d at epoch %d", self.tp, leader_id, leader_epoch)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.controller_epoch = controller_epoch
        self.isr = []
        self.followers = {}
        self.proposed_isr = None
        self._notify()
        return changed

    def step_down(self) -> None:
        """Stop acting as leader: a conditional ISR write showed the controller moved on."""
        logger.warning(
            "%s: fenced at epoch %d, no longer acting as leader", self.tp, self.leader_epoch
        )
        self.leader_id = NO_LEADER
        self.followers = {}
        self.proposed_isr = None
        self._notify()

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idle producers, if the state is loaded (a state not yet loaded is
        expired on the first check after it is)."""
        if not self._producer_state_loaded:
            return 0
        return self._producer_state.expire(now_ms, expiration_ms)

    def stop(self) -> None:
        """The replica is being removed: wake produce requests waiting on it to fail now
        (NOT_LEADER_OR_FOLLOWER, so producers retry on the new leader at once)."""
        self.leader_id = NO_LEADER
        self.followers = {}
        self.proposed_isr = None
        self._notify()

    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Fence a client whose idea of the leader epoch is older or newer than ours."""
        if requested_epoch == NO_LEADER_EPOCH:
            return
        if requested_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.tp}: leader epoch {requested_epoch} is older than {self.leader_epoch}"
            )
        if requested_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.tp}: leader epoch {requested_epoch} is newer than {self.leader_epoch}"
            )

    def require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp} "
                f"(leader: {self.leader_id})"
            )

    def require_enough_in_sync(self) -> None:
        """Refuse an acks=all append while the ISR is smaller than min.insync.replicas
        (NOT_ENOUGH_REPLICAS), before anything is appended."""
        if len(self.isr) < self.min_insync_replicas:
            # More than the replicas can never be in sync: refused for good, not retried.
            check_min_insync_fits(self.tp.topic, self.min_insync_replicas, len(self.replicas))
            raise NotEnoughReplicasError(
                f"{self.tp}: ISR {self.isr} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}"
            )

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        acks: int,
        now_ms: int,
        crc_checked: bool = False,
    ) -> AppendInfo:
        """Append as leader; a retried idempotent batch is answered without appending.
        `crc_checked` as for Log.append.

        A retry of one of the producer's remembered batches gets its original offsets
        (bytes_appended 0). An older duplicate gets first_offset -1 (its offsets are not
        known) and as last_offset the offset it lies at or below, so that an acks=all
        answer (DUPLICATE_SEQUENCE_NUMBER) can still wait until that much is committed.
        """
        self.require_leader()
        if acks == ACKS_ALL:
            self.require_enough_in_sync()
        idempotent = self._idempotent_batch(records)
        if idempotent is not None:
            verdict = self.producer_state.check(idempotent)
            if verdict.outcome in (Outcome.DUPLICATE, Outcome.OLD_DUPLICATE):
                return AppendInfo(
                    first_offset=verdict.base_offset,
                    last_offset=verdict.last_offset,
                    record_count=idempotent.record_count,
                    max_timestamp=idempotent.max_timestamp,
                    bytes_appended=0,
                )
            if verdict.outcome is not Outcome.APPEND:
                raise VERDICT_ERRORS[verdict.outcome](f"{self.tp}: {verdict.reason}")
        info = self.log.append(
            records,
            assign_offsets=True,
            leader_epoch=self.leader_epoch,
            now_ms=now_ms,
            crc_checked=crc_checked,
        )
        if idempotent is not None:
            self.producer_state.record(idempotent, info.first_offset, now_ms)
        self._maybe_advance_high_watermark()
        self._notify()
        return info

    def append_markers(
        self, markers: Sequence[TxnMarker], now_ms: int
    ) -> list[AppendInfo | BrokerResponseError]:
        """Append, as leader, the control batches ending the given transactions; what the
        transaction coordinator's WriteTxnMarkers calls. Per marker, in the order given:
        where it was appended, or the error refusing it.

        The markers accepted go in one append, in the producer state's order
        (`ProducerStateManager.plan_markers`: the transaction that began first ends
        last), so that no prefix of the run a replica may copy makes part of what the
        run ends readable under read_committed. A marker of an older producer epoch is
        INVALID_PRODUCER_EPOCH, of an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED. An ABORT is indexed at once, so a read_committed
        fetch of the transaction's range lists it as soon as the LSO lets it be read.
        """
        self.require_leader()
        plan = self.producer_state.plan_markers(
            [(m.producer_id, m.producer_epoch, m.coordinator_epoch) for m in markers]
        )
        outcomes: dict[int, AppendInfo | BrokerResponseError] = {}
        accepted: list[tuple[int, ControlMarker, bytes]] = []
        for index, verdict in plan:
            if verdict.outcome is not Outcome.APPEND:
                outcomes[index] = VERDICT_ERRORS[verdict.outcome](f"{self.tp}: {verdict.reason}")
                continue
            marker = markers[index]
            control = ControlMarker(marker.control_type, marker.coordinator_epoch)
            batch = build_control_batch(
                control,
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                timestamp_ms=now_ms,
            )
            accepted.append((index, control, batch))
        if accepted:
            info = self.log.append(
                b"".join(batch for _, _, batch in accepted),
                assign_offsets=True,
                leader_epoch=self.leader_epoch,
                now_ms=now_ms,
            )
            for position, (index, control, batch) in enumerate(accepted):
                offset = info.first_offset + position
                self._record_marker(BatchHeader.decode(batch), offset, now_ms, control)
                outcomes[index] = AppendInfo(offset, offset, 1, now_ms, len(batch))
            self._maybe_advance_high_watermark()
            self._notify()
        return [outcomes[index] for index in range(len(markers))]

    def _record_marker(
        self, header: BatchHeader, offset: int, now_ms: int, marker: ControlMarker
    ) -> None:
        """Note a marker now in the log at `offset`; index the transaction if it aborted."""
        completed = self.producer_state.record(header, offset, now_ms, marker)
        if completed is not None and completed.aborted:
            self.log.append_aborted_transaction(completed.as_aborted())

    def _idempotent_batch(self, records: bytes | bytearray | memoryview) -> BatchHeader | None:
        """The header of the request's batch if it is idempotent, else None.

        An idempotent producer sends one batch per partition per request, as Kafka's
        does: a retry then is either wholly a duplicate or wholly new, never a mix
        that would need part of a request appended and part answered from the past.
        """
        headers = [header for header, _ in iter_batches(records)]
        if all(header.producer_id == NO_PRODUCER_ID for header in headers):
            return None
        if len(headers) > 1:
            raise InvalidRecordError(
                f"{self.tp}: an idempotent producer sends one batch per partition per "
                f"request, not {len(headers)}"
            )
        return headers[0]

    def append_as_follower(
        self, records: bytes | memoryview, leader_high_watermark: int, now_ms: int
    ) -> None:
        if records:
            # Loaded before the append, or the replay would already hold these batches.
            state = self.producer_state
            # A lagging follower's answer may hold more than one segment takes at once.
            for run in runs_within(records, self.log.config.segment_bytes):
                self.log.append(run, assign_offsets=False, now_ms=now_ms)
            for header, batch in iter_batches(records):
                if header.is_control:
                    marker = decode_control_marker(batch)
                    self._record_marker(header, header.base_offset, now_ms, marker)
                else:
                    state.record(header, header.base_offset, now_ms)
        self.high_watermark = max(
            self.high_watermark, min(leader_high_watermark, self.log.log_end_offset)
        )
        if self._producer_state_loaded:
            self._producer_state.forget_replicated(self.high_watermark)
        self._notify()

    def follow_leader_log_start(self, leader_log_start_offset: int) -> None:
        """Move the log start up to the leader's, as far as this replica's log reaches.

        A DeleteRecords moves the leader's log start; the followers move theirs when
        their next fetch answer carries it. Below the leader's start every record is
        deleted, so a follower never keeps a start lower than what it holds allows.
        """
        start = min(leader_log_start_offset, self.log.log_end_offset)
        if self.log.advance_log_start_offset(start):
            self.high_watermark = max(self.high_watermark, self.log.log_start_offset)
            self._notify()

    def delete_records_before(self, offset: int) -> int:
        """Move the leader's log start to `offset` (DeleteRecords); return the offset the
        replicas' starts must reach, `offset` itself or the HW it names.

        `offset` may be DELETE_TO_HIGH_WATERMARK. Only committed records can be deleted:
        past the HW it is OffsetOutOfRangeError, as in Kafka. The start never moves back
        (an offset below it changes nothing). The followers move theirs on their next
        fetch, whose answer carries the leader's start (follow_leader_log_start); the
        request waits for them with wait_for_low_watermark.
        """
        self.require_leader()
        target = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if not 0 <= target <= self.high_watermark:
            raise OffsetOutOfRangeError(
                f"{self.tp}: cannot delete records below offset {offset}: it must be between "
                f"0 and the high watermark {self.high_watermark}, or -1 for the high watermark"
            )
        if self.log.advance_log_start_offset(target):
            self._notify()
        return target

    def low_watermark(self, live: Collection[int]) -> int:
        """The lowest log start over the ISR's `live` members (rules.py, rule 9); -1 while
        one is unknown."""
        return isr_low_watermark(
            self.local_broker_id, self.log.log_start_offset, self.followers, self.isr, live
        )

    def note_log_start_answered(self, replica_id: int) -> None:
        """A fetch answer without error to follower `replica_id` carries this log start."""
        follower = self.followers.get(replica_id)
        start = self.log.log_start_offset
        if follower is not None and follower.log_start_answered != start:
            self.followers[replica_id] = replace(follower, log_start_answered=start)

    async def wait_for_low_watermark(
        self, offset: int, timeout_s: float, live: Callable[[], Collection[int]]
    ) -> int:
        """Return the low watermark once every live ISR member's log start reached `offset`
        (Kafka's DeleteRecords purgatory); raise if leadership moves or the time is up.
        `live()`: the brokers the controller counts live now; a broker's death changes
        nothing here, so the wait also looks again every LIVE_BROKERS_RECHECK_S."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        term = self.leadership_term
        while True:
            if not self.is_leader or self.leadership_term != term:
                raise NotLeaderOrFollowerError(
                    f"{self.tp}: leadership moved while waiting for the replicas to delete "
                    f"the records below {offset}"
                )
            low_watermark = self.low_watermark(live())
            if low_watermark >= offset:
                return low_watermark
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"{self.tp}: the replicas of ISR {self.isr} did not all move their log "
                    f"start to {offset} within {timeout_s * 1000:.0f} ms (lowest: {low_watermark})"
                )
            await wait_for_change((self,), min(remaining, LIVE_BROKERS_RECHECK_S))

    def truncate_to(self, offset: int) -> None:
        """Truncate the log as a follower does to match its leader; rebuild producer state.

        The removed batches may have been the latest of some producers, so the state is
        replayed from what is left (lazily, on next use). The HW cannot stay past the end.
        """
        self.log.truncate_to(offset)
        self._producer_state_loaded = False
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log to restart at `offset` (the leader's log start); no producers remain."""
        self.log.truncate_fully_and_start_at(offset)
        self._producer_state_loaded = False

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from `fetch_offset`: that is its log end offset now.

        An offset outside this log is refused before anything is recorded, so that it can
        neither count as caught up nor bring the follower into the ISR.
        """
        log = self.log
        if not fetch_offset_in_range(fetch_offset, log.log_start_offset, log.log_end_offset):
            raise OffsetOutOfRangeError(
                f"{self.tp}: replica {replica_id} fetches from {fetch_offset}, outside the "
                f"leader's log [{log.log_start_offset}, {log.log_end_offset}]"
            )
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        follower = after_fetch(follower, fetch_offset, log.log_end_offset, now_ms)
        self.followers[replica_id] = follower
        self._maybe_expand_isr(replica_id, follower)
        self._maybe_advance_high_watermark()

    def record_follower_log_start(self, replica_id: int, fetch_offset: int) -> None:
        """A fetch from `fetch_offset` has just arrived from follower `replica_id`: what it
        shows of the follower's log start (rules.py, rule 9). Once per fetch, not per read."""
        follower = self.followers.get(replica_id)
        log = self.log
        if follower is None or not fetch_offset_in_range(
            fetch_offset, log.log_start_offset, log.log_end_offset
        ):
            return
        start = follower_log_start(follower, fetch_offset)
        if start != follower.log_start_offset:
            self.followers[replica_id] = replace(follower, log_start_offset=start)
            self._notify()  # a DeleteRecords may be waiting for it

    def _maybe_expand_isr(self, replica_id: int, follower: FollowerProgress) -> None:
        if replica_id in self.isr or self.proposed_isr is not None:
            return
        if may_join_isr(
            follower.log_end_offset, self.high_watermark, self.leader_epoch_start_offset
        ):
            self.proposed_isr = sorted([*self.isr, replica_id])

    def propose_isr_shrink(self, now_ms: int, lag_max_ms: int) -> bool:
        """Propose dropping followers not caught up for `lag_max_ms`; True if proposed."""
        if not self.is_leader or self.proposed_isr is not None:
            return False
        lagging = lagging_replicas(
            self.isr, self.local_broker_id, self.followers, now_ms, lag_max_ms
        )
        if not lagging:
            return False
        self.proposed_isr = [r for r in self.isr if r not in lagging]
        logger.info("%s: shrinking ISR %s -> %s", self.tp, self.isr, self.proposed_isr)
        return True

    def apply_isr(self, isr: list[int], zk_version: int) -> None:
        """The proposed ISR was written to ZooKeeper at `zk_version`."""
        self.isr = list(isr)
        self.zk_version = zk_version
        self.proposed_isr = None
        self._maybe_advance_high_watermark()
        self._notify()

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the HW is computed over: the current one plus any pending additions."""
        return maximal_isr(self.isr, self.proposed_isr)

    def _maybe_advance_high_watermark(self) -> None:
        # At the log end the HW cannot move: the common case of an idle follower's fetch.
        if not self.is_leader or self.high_watermark >= self.log.log_end_offset:
            return
        follower_ends = {r: f.log_end_offset for r, f in self.followers.items()}
        advanced = high_watermark(
            self.high_watermark,
            self.local_broker_id,
            self.log.log_end_offset,
            follower_ends,
            self.maximal_isr,
        )
        if advanced > self.high_watermark:
            self.high_watermark = advanced
            if self._producer_state_loaded:
                self._producer_state.forget_replicated(advanced)
            self._wake(self._take_change_waiters())

    def _notify(self) -> None:
        self._wake(self._take_change_waiters())
        if self._log_waiters:
            waiters, self._log_waiters = self._log_waiters, set()
            self._wake(waiters)

    def _take_change_waiters(self) -> set[asyncio.Future[bool]]:
        waiters, self._change_waiters = self._change_waiters, set()
        return waiters

    @staticmethod
    def _wake(waiters: set[asyncio.Future[bool]]) -> None:
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        current_leader_epoch: int,
        for_replica: bool,
        read_committed: bool = False,
    ) -> bytes:
        """Batches from `fetch_offset`: below the HW for consumers (below the LSO for
        read_committed ones), below the LEO for replicas."""
        limit = self._read_limit(fetch_offset, max_bytes, current_leader_epoch, for_replica)
        if limit is None:
            return b""
        if read_committed:
            limit = min(limit, self.last_stable_offset)
        return self.log.read(fetch_offset, max_bytes, max_offset=limit)

    def read_stored(
        self, fetch_offset: int, max_bytes: int, *, current_leader_epoch: int, region_bytes: int
    ) -> list[bytes | FileRegion]:
        """A consumer's read (below the HW), with large ranges left in the file to be sent
        as stored (Log.read_stored). Only committed batches are read this way: a replica
        truncates only above its HW (except after an unclean election), so what the ranges
        hold stays what was read; a range found short ends its connection (file_region)."""
        limit = self._read_limit(fetch_offset, max_bytes, current_leader_epoch, for_replica=False)
        if limit is None:
            return []
        return self.log.read_stored(
            fetch_offset, max_bytes, max_offset=limit, region_bytes=region_bytes
        )

    def _read_limit(
        self, fetch_offset: int, max_bytes: int, current_leader_epoch: int, for_replica: bool
    ) -> int | None:
        """The offset a read stops below (the HW for consumers, the LEO for replicas), once
        leadership and the epoch are checked; None when nothing lies past the fetch offset."""
        self.require_leader()
        self.check_leader_epoch(current_leader_epoch)
        log_end = self.log.log_end_offset
        if fetch_offset == log_end and max_bytes > 0:
            # Nothing past the log end: the answer of most partitions of an idle fetch.
            return None
        return log_end if for_replica else self.high_watermark

    @property
    def change_waiters(self) -> int:
        """How many waits are registered here now (each ends by leaving)."""
        return len(self._change_waiters) + len(self._log_waiters)

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> None:
        """Return once `offset` is committed; raise if it cannot be, or the deadline passes.

        The ISR may have shrunk after the append, and the HW then passed `offset` with
        fewer copies than min.insync.replicas: that is NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        never success (the records stay; an idempotent retry is answered as a duplicate
        once the ISR has grown back).

        A new leader epoch while this broker stays leader (the controller took a dead
        follower out of the ISR) leaves the log and the append as they were, so the wait
        goes on, as Kafka's does; only losing leadership (`leadership_term`) ends it. Ending
        it on the epoch made an acks=all write, and with it a coordinator's EndTxn, fail
        whenever a follower's session expired while the write waited for it.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        term = self.leadership_term
        while True:
            if not self.is_leader or self.leadership_term != term:
                raise NotLeaderOrFollowerError(
                    f"{self.tp}: leadership moved while waiting for offset {offset} to commit"
                )
            isr = self.maximal_isr
            outcome = acks_all_outcome(
                offset, self.high_watermark, len(isr), self.min_insync_replicas
            )
            if outcome is AckOutcome.COMMITTED:
                return
            if outcome is AckOutcome.NOT_ENOUGH_REPLICAS:
                raise NotEnoughReplicasAfterAppendError(
                    f"{self.tp}: offset {offset} reached the HW with ISR {isr}, smaller "
                    f"than min.insync.replicas={self.min_insync_replicas}"
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"{self.tp}: offset {offset} not replicated to the ISR within "
                    f"{timeout_s * 1000:.0f} ms (HW {self.high_watermark})"
                )
            await wait_for_change((self,), remaining)


async def wait_for_change(
    partitions: Collection[Partition], timeout_s: float, *, high_watermark: bool = True
) -> bool:
    """Wait until any of `partitions` changes (True) or `timeout_s` passes (False); with
    `high_watermark=False` a HW move alone is not a change.

    One future and one timer, whatever the number of partitions; the future is taken
    out of every partition's set on the way out, a cancelled wait included, so that
    partitions never hold on to waits that have ended.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[bool] = loop.create_future()
    for partition in partitions:
        waiters = partition._change_waiters if high_watermark else partition._log_waiters
        waiters.add(waiter)
    timer = loop.call_later(timeout_s, _expire, waiter)
    try:
        return await waiter
    finally:
        timer.cancel()
        for partition in partitions:
            partition._change_waiters.discard(waiter)
            partition._log_waiters.discard(waiter)


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
