"""The broker's log cleaner: picks the dirtiest compacted log, cleans it off the loop.

Concurrency: a LogCleaner is owned by the broker's event loop, like the ReplicaManager
whose partitions it cleans; its state (progress, the logs being cleaned) is touched on
the loop only. Each of log.cleaner.threads cleaner tasks runs on the loop and loops:

1. on the loop: choose a log and take its CleaningJob (a view of sealed segments, no
   I/O beyond memory);
2. in a worker process of the cleaner's own pool (brokerd/log/cleaner_worker.py says
   why a process): read, plan and write the `.cleaned` segments (cleaner.clean), the
   long part, which never holds the loop;
3. on the loop: swap them in (Log.swap_cleaned: renames and a small manifest, between
   two of the loop's steps, so readers see the old segments or the new), note the
   progress, and write `cleaner-offset-checkpoint` on a worker thread.

When no log is worth cleaning a task sleeps log.cleaner.backoff.ms. A log is worth
cleaning, as in Kafka, when its dirty ratio reaches min.cleanable.dirty.ratio, when
a dirty segment is older than max.compaction.lag.ms, or when tombstones that the last
cleaning kept have passed delete.retention.ms; the dirtiest goes first. Two tasks never clean
the same log. Followers clean their own copies, as Kafka's replicas do.

For the metrics (brokerd/metrics/cleaner_figures.py) the cleaner notes, per choice, the
dirty ratio of the dirtiest compacted log, per cleaning its bytes, length and how full
its key map was (the last log.cleaner.threads of them), and when a task last finished a
pass; nothing per record.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing.synchronize import Event as StopEvent

from brokerd.config.cleaner import CleanerConfig
from brokerd.log import Log, read_offsets_checkpoint, write_offsets_checkpoint
from brokerd.log.cleaner import CleaningJob, CleaningStopped
from brokerd.log.cleaner_checkpoint import CLEANER_CHECKPOINT_FILE, CleanerProgress
from brokerd.log.cleaner_plan import max_keys_for
from brokerd.log.cleaner_worker import clean_in_worker, cleaner_pool
from brokerd.metrics.cleaner_figures import CleanerFigures, CleaningStats, cleaner_figures
from brokerd.replication.partition import Partition
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.records import now_ms
from spark_replica.topics import TopicPartition

logger = logging.getLogger("brokerd.log_cleaner")


@dataclass(frozen=True, slots=True)
class _Choice:
    tp: TopicPartition
    partition: Partition
    job: CleaningJob


class LogCleaner:
    def __init__(self, replicas: ReplicaManager, config: CleanerConfig) -> None:
        self._replicas = replicas
        self._config = config
        self._checkpoint_path = replicas.config.log_dir / CLEANER_CHECKPOINT_FILE
        self._progress = CleanerProgress(read_offsets_checkpoint(self._checkpoint_path), now_ms())
        self._in_progress: set[TopicPartition] = set()
        # The log each partition's progress is about, to tell a recreated one apart.
        self._known_logs: dict[TopicPartition, Log] = {}
        self._stopping = False
        self._stop: StopEvent | None = None  # shared with the pool's workers
        self._pool: ProcessPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._checkpoint_lock = threading.Lock()
        self.cleanings = 0  # swapped in since start, for tests and metrics
        self._recent: deque[CleaningStats] = deque(maxlen=config.threads)
        self._dirtiest_ratio = 0.0
        self._last_run_ms = now_ms()

    def start(self) -> None:
        if not self._config.enable:
            logger.info("log cleaner disabled (log.cleaner.enable=false)")
            return
        self._pool, self._stop = cleaner_pool(self._config.threads)
        self._tasks = [asyncio.create_task(self._run()) for _ in range(self._config.threads)]

    async def stop(self) -> None:
        """Stop the tasks; a cleaning in progress gives up at its next segment."""
        self._stopping = True
        if self._stop is not None:
            self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._pool is not None:
            await asyncio.to_thread(self._pool.shutdown, wait=True)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                cleaned = await self.clean_one()
            except Exception:
                logger.exception("log cleaning failed")
                cleaned = False
            self._last_run_ms = now_ms()
            if not cleaned:
                await asyncio.sleep(self._config.backoff_ms / 1000)

    async def clean_one(self) -> bool:
        """Clean the dirtiest log worth cleaning, if any; whether one was swapped in."""
        choice = self._choose(now_ms())
        if choice is None:
            return False
        self._in_progress.add(choice.tp)
        try:
            return await self._clean(choice)
        finally:
            self._in_progress.discard(choice.tp)

    def figures(self, now: int) -> CleanerFigures | None:
        """The metrics' figures; None when the cleaner is off, as Kafka then has none."""
        if not self._config.enable:
            return None
        return cleaner_figures(list(self._recent), self._dirtiest_ratio, self._last_run_ms, now)

    def _choose(self, now: int) -> _Choice | None:
        best: _Choice | None = None
        dirtiest = 0.0
        for tp, partition in self._replicas.partitions.items():
            log = partition.log
            config = log.config
            if not config.compacts or tp in self._in_progress:
                continue
            if self._known_logs.setdefault(tp, log) is not log:
                self._progress.forget(tp)  # deleted and created again: a new log
                self._known_logs[tp] = log
            first_dirty = self._progress.first_dirty(tp, log.truncation_count)
            if first_dirty > log.log_end_offset:
                # A checkpoint from a log that is gone (its files were removed).
                self._progress.forget(tp)
                first_dirty = 0
            retention = config.delete_retention_ms
            due = self._progress.tombstones_due(tp, retention, now)
            job = log.cleaning_job(
                partition.high_watermark,
                first_dirty,
                self._progress.tombstone_horizon(tp, retention, now),
                now,
                tombstones_due=due,
            )
            if job is None:
                continue
            dirtiest = max(dirtiest, job.dirty_ratio)
            if not (due or _dirty_enough(job, now)):
                continue
            if best is None or job.dirty_ratio > best.job.dirty_ratio:
                best = _Choice(tp, partition, job)
        self._dirtiest_ratio = dirtiest
        return best

    async def _clean(self, choice: _Choice) -> bool:
        assert self._pool is not None
        max_keys = max_keys_for(self._config.dedupe_buffer_size)
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            result = await loop.run_in_executor(
                self._pool,
                clean_in_worker,
                choice.job,
                max_keys,
                self._config.io_max_bytes_per_second,
            )
        except CleaningStopped:
            return False
        log = choice.partition.log
        if self._replicas.partitions.get(choice.tp) is not choice.partition:
            return False
        if not log.swap_cleaned(result, now_ms()):
            logger.info("%s: log changed during cleaning; will clean again", choice.tp)
            return False
        self._progress.record(
            choice.tp,
            result.first_dirty,
            choice.job.tombstone_horizon,
            result.truncations,
            now_ms(),
            result.tombstones_kept,
        )
        self.cleanings += 1
        self._recent.append(
            CleaningStats(
                result.bytes_read,
                result.bytes_written,
                time.monotonic() - started,
                # Kafka's count: a key is one of the map's max_keys 24-byte entries. The
                # first batch is mapped whole even when it has more keys: full, then.
                min(1.0, result.mapped_keys / max_keys),
            )
        )
        await asyncio.to_thread(self._write_checkpoint, self._checkpoint_offsets())
        return True

    def _checkpoint_offsets(self) -> dict[TopicPartition, int]:
        hosted = self._replicas.partitions
        for tp in [tp for tp in self._progress.offsets() if tp not in hosted]:
            self._progress.forget(tp)
            self._known_logs.pop(tp, None)
        return self._progress.offsets()

    def _write_checkpoint(self, offsets: dict[TopicPartition, int]) -> None:
        with self._checkpoint_lock:
            write_offsets_checkpoint(self._checkpoint_path, offsets)


def _dirty_enough(job: CleaningJob, now: int) -> bool:
    """Kafka's rule: the dirty ratio reaches the topic's minimum, or a dirty segment is
    older than max.compaction.lag.ms (its newest record is)."""
    if job.dirty_ratio >= job.config.min_cleanable_dirty_ratio and job.dirty_ratio > 0:
        return True
    lag_cutoff = now - job.config.max_compaction_lag_ms
    return any(
        segment.next_offset > job.first_dirty and segment.max_timestamp < lag_cutoff
        for segment in job.cleanable
    )
