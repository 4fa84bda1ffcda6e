"""The log against an in-memory model, under random appends, reads, truncations and crashes.

The model is the list of batches the log should hold. Segment layout is the log's own
business, so retention is checked through what it may and may not delete, and a crash
is modelled by laying out the active segment's batches to see which ones a cut reaches.
Batches carry leader epochs that never decrease, as a leader writes them, so the epoch
cache must equal the epochs' first offsets in the batches held.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from brokerd.log import LEADER_EPOCH_CHECKPOINT_FILE, UNDEFINED_EPOCH_END, Log, LogConfig
from spark_replica.errors import (
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from spark_replica.records import (
    BASE_OFFSET_FIELD,
    LEADER_EPOCH_FIELD_OFFSET,
    build_batch,
    decode_payload,
    iter_batches,
)

RECORD = st.tuples(st.binary(max_size=12), st.integers(min_value=0, max_value=1000))
"""A value and a timestamp, in ms after the current time, so records age as time passes."""
BATCH = st.lists(RECORD, min_size=1, max_size=4)
BATCHES = st.lists(BATCH, min_size=1, max_size=3)
EPOCH_STEP = st.sampled_from([0, 0, 1, 3])
"""How much the leader epoch grows from one batch (or election) to the next."""


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    epoch: int
    values: tuple[bytes, ...]
    timestamps: tuple[int, ...]
    size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.values) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.values)

    @property
    def records(self) -> list[tuple[int, bytes]]:
        return [(self.base_offset + i, value) for i, value in enumerate(self.values)]


def decoded(data: bytes) -> list[tuple[int, bytes]]:
    result = []
    for header, whole in iter_batches(data):
        values = decode_payload(whole).column("value").to_pylist()
        result += [(header.base_offset + i, value) for i, value in enumerate(values)]
    return result


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="log-model-"))
        self.directory = self.root / "topic-0"
        self.batches: list[ModelBatch] = []
        self.start = 0
        self.end = 0
        self.now_ms = 0
        self.epoch = 0
        # False once a flipped byte changed an epoch on disk, which nothing can detect.
        self.epochs_known = True
        # The latest epoch while retention has emptied the log: the cache keeps it.
        self.emptied_epoch: int | None = None

    @initialize(
        segment_bytes=st.sampled_from([1400, 2500, 6000]),
        index_interval_bytes=st.sampled_from([0, 700, 4096]),
        retention_bytes=st.sampled_from([-1, 0, 3000, 12000]),
        retention_ms=st.sampled_from([-1, 0, 1000, 3000]),
    )
    def open_log(
        self, segment_bytes: int, index_interval_bytes: int, retention_bytes: int, retention_ms: int
    ) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes,
            retention_bytes=retention_bytes,
            retention_ms=retention_ms,
        )
        self.log = Log.open(self.directory, self.config, now_ms=self.now_ms)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _build(
        self, batches: list[list[tuple[bytes, int]]], epochs: list[int], *, stamped: bool
    ) -> tuple[bytes, list[ModelBatch]]:
        """The batches' bytes, with their epochs unless the leader is to stamp them."""
        parts, model = [], []
        offset = self.end
        for records, epoch in zip(batches, epochs, strict=True):
            values = [value for value, _ in records]
            timestamps = [self.now_ms + delay for _, delay in records]
            stored_epoch = -1 if stamped else epoch
            part = build_batch(
                values, timestamps=timestamps, base_offset=offset, leader_epoch=stored_epoch
            )
            parts.append(part)
            model.append(ModelBatch(offset, epoch, tuple(values), tuple(timestamps), len(part)))
            offset += len(records)
        return b"".join(parts), model

    def _append(
        self, batches: list[list[tuple[bytes, int]]], epochs: list[int], *, assign_offsets: bool
    ) -> None:
        data, model = self._build(batches, epochs, stamped=assign_offsets)
        leader_epoch = self.epoch if assign_offsets else None
        if len(data) > self.config.segment_bytes:
            with pytest.raises(RecordListTooLargeError):
                self.log.append(
                    data,
                    assign_offsets=assign_offsets,
                    leader_epoch=leader_epoch,
                    now_ms=self.now_ms,
                )
            return
        info = self.log.append(
            data, assign_offsets=assign_offsets, leader_epoch=leader_epoch, now_ms=self.now_ms
        )
        assert (info.first_offset, info.last_offset) == (self.end, model[-1].last_offset)
        self.batches += model
        self.end = model[-1].next_offset
        self.epoch = epochs[-1]
        self.emptied_epoch = None

    @rule(batches=BATCHES)
    def append_as_leader(self, batches: list[list[tuple[bytes, int]]]) -> None:
        self._append(batches, [self.epoch] * len(batches), assign_offsets=True)

    @rule(data=st.data(), batches=BATCHES)
    def append_as_replica(
        self, data: st.DataObject, batches: list[list[tuple[bytes, int]]]
    ) -> None:
        """A follower copies batches the leader wrote, perhaps across an epoch change."""
        steps = data.draw(st.lists(EPOCH_STEP, min_size=len(batches), max_size=len(batches)))
        epochs = list(itertools.accumulate(steps, initial=self.epoch))[1:]
        self._append(batches, epochs, assign_offsets=False)

    @rule(step=EPOCH_STEP)
    def elect_leader(self, step: int) -> None:
        self.epoch += step

    @rule(batch=BATCH, overlap=st.sampled_from([1, 2]))
    def append_overlapping(self, batch: list[tuple[bytes, int]], overlap: int) -> None:
        """A copy may skip offsets (a compacted leader log has gaps), never go back."""
        values = [value for value, _ in batch]
        data = build_batch(
            values,
            timestamps=[self.now_ms] * len(batch),
            base_offset=self.end - overlap,
            leader_epoch=self.epoch + 1,
        )
        with pytest.raises(InvalidRecordError):
            self.log.append(data, assign_offsets=False, now_ms=self.now_ms)

    @rule(data=st.data(), max_bytes=st.integers(1, 4000), capped=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, capped: bool) -> None:
        start = data.draw(st.integers(max(self.start - 2, 0), self.end + 2), label="start")
        max_offset = data.draw(st.integers(self.start, self.end + 1), label="max_offset")
        max_offset_arg = max_offset if capped else None
        if not self.start <= start <= self.end:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(start, max_bytes, max_offset=max_offset_arg)
            return
        got = self.log.read(start, max_bytes, max_offset=max_offset_arg)
        assert decoded(got) == self._expected_read(start, max_bytes, max_offset_arg)

    def _expected_read(
        self, start: int, max_bytes: int, max_offset: int | None
    ) -> list[tuple[int, bytes]]:
        limit = self.end if max_offset is None else min(max_offset, self.end)
        taken: list[ModelBatch] = []
        for batch in self.batches:
            if batch.next_offset <= start:
                continue
            if batch.last_offset >= limit:
                break
            if taken and sum(b.size for b in taken) + batch.size > max_bytes:
                break
            taken.append(batch)
        return [record for batch in taken for record in batch.records]

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        near_end = st.integers(max(self.end - 8, 0), self.end + 2)
        anywhere = st.integers(max(self.start - 2, 0), self.end + 2)
        offset = data.draw(near_end | anywhere, label="offset")
        self.log.truncate_to(offset)
        if offset >= self.end:
            return
        self.emptied_epoch = None
        if offset <= self.start:
            self.batches, self.start, self.end = [], offset, offset
            return
        self.batches = [batch for batch in self.batches if batch.next_offset <= offset]
        self.end = self.batches[-1].next_offset if self.batches else self.start

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now_ms)

    @rule(elapsed=st.integers(0, 800))
    def advance_time(self, elapsed: int) -> None:
        self.now_ms += elapsed

    @precondition(lambda self: self.end > self.start)
    @rule(roll_first=st.booleans())
    def apply_retention(self, roll_first: bool) -> None:
        """Retention of a log with records, whose newest ones rolling may expose to it."""
        epochs_before = self._expected_epochs()
        if roll_first:
            self.log.roll(self.now_ms)
        self.log.delete_expired_segments(self.now_ms)
        new_start = self.log.log_start_offset
        assert self.start <= new_start <= self.end
        deleted = [batch for batch in self.batches if batch.base_offset < new_start]
        if deleted:
            assert deleted[-1].next_offset == new_start
            assert self.config.retention_bytes >= 0 or self._all_expired(deleted)
        self.batches = self.batches[len(deleted) :]
        self.start = new_start
        if deleted and not self.batches and epochs_before:
            self.emptied_epoch = epochs_before[-1][0]

    def _all_expired(self, batches: list[ModelBatch]) -> bool:
        cutoff = self.now_ms - self.config.retention_ms
        return self.config.retention_ms >= 0 and all(max(b.timestamps) < cutoff for b in batches)

    @rule(data=st.data())
    def find_timestamp(self, data: st.DataObject) -> None:
        timestamp = data.draw(st.integers(0, self.now_ms + 1100), label="timestamp")
        expected = next(
            (
                (batch.base_offset + i, ts)
                for batch in self.batches
                for i, ts in enumerate(batch.timestamps)
                if ts >= timestamp
            ),
            None,
        )
        assert self.log.offset_for_timestamp(timestamp) == expected

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self._open_after_close()

    def _open_after_close(self) -> None:
        """Reopen; an emptied log's epoch has no records, and is forgotten as after a crash."""
        self.log = Log.open(self.directory, self.config, now_ms=self.now_ms)
        self.emptied_epoch = None

    @rule()
    def lose_epoch_checkpoint(self) -> None:
        self.log.close()
        (self.directory / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
        self._open_after_close()

    def _expected_epochs(self) -> list[tuple[int, int]]:
        """Each epoch of the batches held, with the offset where its first batch starts."""
        if not self.batches and self.emptied_epoch is not None:
            return [(self.emptied_epoch, self.end)]
        first_offsets: dict[int, int] = {}
        for batch in self.batches:
            first_offsets.setdefault(batch.epoch, batch.base_offset)
        return list(first_offsets.items())

    @precondition(lambda self: self.epochs_known)
    @rule(data=st.data())
    def end_offset_for_epoch(self, data: st.DataObject) -> None:
        requested = data.draw(st.integers(-1, self.epoch + 1), label="requested")
        epochs = self._expected_epochs()
        older = [epoch for epoch, _ in epochs if epoch <= requested]
        newer = [start for epoch, start in epochs if epoch > requested]
        if not older or (not newer and requested != epochs[-1][0]):
            expected = UNDEFINED_EPOCH_END
        else:
            expected = (older[-1], newer[0] if newer else self.end)
        assert self.log.end_offset_for_epoch(requested) == expected

    def _active_batches(self) -> tuple[Path, list[ModelBatch]]:
        """The active segment file and the model batches it holds, in file order."""
        path = sorted(self.directory.glob("*.log"))[-1]
        base = int(path.stem)
        return path, [batch for batch in self.batches if batch.base_offset >= base]

    def _keep_before(self, kept: int, active: list[ModelBatch]) -> None:
        """After a crash, keep the first `kept` batches of the active segment."""
        dropped = active[kept:]
        if dropped:
            self.batches = self.batches[: len(self.batches) - len(dropped)]
            self.end = dropped[0].base_offset

    @rule(data=st.data())
    def crash_with_torn_tail(self, data: st.DataObject) -> None:
        self.log.close()
        path, active = self._active_batches()
        size = path.stat().st_size
        cut = data.draw(st.integers(0, min(size, 100)) | st.integers(0, size), label="cut")
        with open(path, "r+b") as file:
            file.truncate(size - cut)
        end, kept = 0, 0
        while kept < len(active) and end + active[kept].size <= size - cut:
            end += active[kept].size
            kept += 1
        self._keep_before(kept, active)
        self._open_after_close()

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def crash_with_flipped_byte(self, data: st.DataObject) -> None:
        self.log.close()
        path, active = self._active_batches()
        if not active:
            self._open_after_close()
            return
        position = data.draw(st.integers(0, path.stat().st_size - 1), label="position")
        kept, start = 0, 0
        while start + active[kept].size <= position:
            start += active[kept].size
            kept += 1
        within = position - start
        if within < BASE_OFFSET_FIELD.size:
            # Outside the CRC, and a larger base offset reads as a gap the cleaner left
            # (as in Kafka): not detectable, so not flipped. A smaller one is cut, see
            # test_log.py's test_recovery_drops_a_batch_that_does_not_follow.
            self._open_after_close()
            return
        content = bytearray(path.read_bytes())
        content[position] ^= 0x5A
        path.write_bytes(content)
        outside_crc = LEADER_EPOCH_FIELD_OFFSET <= within < LEADER_EPOCH_FIELD_OFFSET + 4
        self._keep_before(len(active) if outside_crc else kept, active)
        self.epochs_known = self.epochs_known and not outside_crc
        self._open_after_close()

    @invariant()
    def offsets_and_size_match(self) -> None:
        if not hasattr(self, "log"):
            return
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.start, self.end)
        assert self.log.size_bytes == sum(batch.size for batch in self.batches)

    @invariant()
    def epochs_match_the_batches(self) -> None:
        if hasattr(self, "log") and self.epochs_known:
            assert list(self.log.epoch_cache.entries) == self._expected_epochs()


LogModel.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.slow
class TestLogModel(LogModel.TestCase):
    pass
