"""A CDC-style compacted topic on a real broker, for the tests of what its readers see
once the cleaner has been through it (tests/integration/test_compaction_scale.py,
tests/spark/test_compaction_read.py); and, for the tests that kill brokers while they
clean (tests/integration/test_compaction_cleaner.py,
tests/integration/test_compaction_sigkill_replicas.py), what a compacted log may hold
after a crash, read from a replica's files or from a reader.

The topic gets `records` values cycling over `keys` keys, then a tombstone for each of
the first half of the keys, then enough records of a filler key to seal the segment that
holds the tombstones (the cleaner never touches the active segment). Its segments are
small so that nearly all of the log is sealed and cleanable; the broker's cleaner backs
off 200 ms, so a cleaning follows a write within a second.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from brokerd.log.cleaner_swap import SWAP_SUFFIX
from brokerd.log.segment import LOG_SUFFIX
from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.records import decode_payload, iter_batches
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from tests.support import BrokerFactory, create_topic, rows_of, run

CLEANER_BROKER_OVERRIDES = {"log.cleaner.backoff.ms": "200"}
FILLER_KEY = "filler"
FILLER_RECORDS = 1_000
BATCH_RECORDS = 1_000
READ_TIMEOUT_S = 30.0
CLEANED_POLL_S = 1.0

# (offset, key, value) of one record; a tombstone's value is None.
Row = tuple[int, bytes, bytes | None]


def compacted_topic_configs(delete_retention_ms: int) -> dict[str, str]:
    """Segments of 256 KiB (a batch of BATCH_RECORDS fits), every dirty byte worth a
    cleaning, tombstones kept `delete_retention_ms`."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": "262144",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(delete_retention_ms),
    }


@dataclass(frozen=True)
class UpsertTopic:
    """What was produced to a compacted topic: the shape of the workload, and each live
    key's last (acknowledged offset, key, value)."""

    name: str
    keys: int
    last_live: dict[str, Row]
    tombstones_sent_at: float

    def is_tombstoned(self, name: str) -> bool:
        return is_tombstoned(name, self.keys)


def key(number: int) -> str:
    return f"key-{number:04d}"


def is_tombstoned(name: str, keys: int) -> bool:
    """The first half of the keys get a tombstone."""
    return name != FILLER_KEY and int(name.removeprefix("key-")) < keys // 2


async def fill_upsert_topic(
    bootstrap: list[tuple[str, int]], topic: str, records: int, keys: int, delete_retention_ms: int
) -> UpsertTopic:
    """Create the topic and produce its values, tombstones and filler (see above)."""
    await create_topic(bootstrap, topic, **compacted_topic_configs(delete_retention_ms))
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(batch_records=BATCH_RECORDS))
        names = [key(i % keys) for i in range(records)]
        values = [f"{k}-v{i}" for i, k in enumerate(names)]
        sent = await producer.send_records(topic, values, names, partition=0)
        tombstones_sent_at = time.monotonic()
        tombstoned = [key(i) for i in range(keys // 2)]
        await producer.send_records(topic, [None] * len(tombstoned), tombstoned, partition=0)
        filler = ["x" * 100] * FILLER_RECORDS
        await producer.send_records(topic, filler, [FILLER_KEY] * len(filler), partition=0)
        await producer.close()
    finally:
        await cluster.close()
    last = {
        k: (m.offset, k.encode(), v.encode()) for k, v, m in zip(names, values, sent, strict=True)
    }
    live = {k: row for k, row in last.items() if not is_tombstoned(k, keys)}
    return UpsertTopic(topic, keys, live, tombstones_sent_at)


async def read_natively(bootstrap: list[tuple[str, int]], topic: str) -> list[Row]:
    """Every record from the log start to the high watermark, across offset gaps."""
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning()
        end = (await consumer.list_offsets([tp], LATEST_TIMESTAMP))[tp][0]
        fetched = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while consumer.position(tp) < end and time.monotonic() < deadline:
            fetched += await consumer.poll(max_wait_ms=200)
        assert consumer.position(tp) == end, "the native consumer reached the high watermark"
    finally:
        await cluster.close()
    return [(row["offset"], row["key"], row["value"]) for row in rows_of(fetched)]


def rows_by_key(rows: list[Row]) -> dict[str, list[Row]]:
    """The rows of each key but the filler, by key, in offset order."""
    by_key: dict[str, list[Row]] = {}
    for row in rows:
        name = row[1].decode()
        if name != FILLER_KEY:
            by_key.setdefault(name, []).append(row)
    return by_key


@dataclass(frozen=True)
class CleanedLog:
    """The topic's records once cleaned, and whether each tombstone was seen as the only
    record of its key before the tombstones went."""

    rows: list[Row]
    tombstones_seen_alone: bool


def wait_until_cleaned(
    bootstrap: list[tuple[str, int]], produced: UpsertTopic, timeout_s: float
) -> CleanedLog:
    """Read the topic every CLEANED_POLL_S until each live key holds only its last value
    and the tombstoned keys are gone; fail after `timeout_s`."""
    expected = {k: [row] for k, row in produced.last_live.items()}
    deadline = time.monotonic() + timeout_s
    seen_alone = False
    while True:
        rows = run(read_natively(bootstrap, produced.name))
        by_key = rows_by_key(rows)
        live = {k: v for k, v in by_key.items() if not produced.is_tombstoned(k)}
        tombstoned = [v for k, v in by_key.items() if produced.is_tombstoned(k)]
        seen_alone |= len(tombstoned) == produced.keys // 2 and all(
            len(records) == 1 and records[0][2] is None for records in tombstoned
        )
        if live == expected and not tombstoned:
            return CleanedLog(rows, seen_alone)
        assert time.monotonic() < deadline, (
            f"not cleaned in {timeout_s} s: {len(rows)} records, "
            f"{len(tombstoned)} tombstoned keys still there"
        )
        time.sleep(CLEANED_POLL_S)


@contextlib.contextmanager
def running_cleaner_broker(zookeeper_connect: str, directory: Path) -> Iterator[BrokerProcess]:
    """One broker whose cleaner backs off 200 ms, under a chroot of its own, stopped on
    leaving."""
    factory = BrokerFactory(f"{zookeeper_connect}/test-{uuid.uuid4().hex[:12]}", directory)
    try:
        yield factory.start(1, **CLEANER_BROKER_OVERRIDES)
    finally:
        factory.stop_all()


# --------------------------------------------------------------------------- crashes

# What was produced and acknowledged: (key, value) by offset.
Produced = Mapping[int, tuple[bytes, bytes | None]]
LIVE_READ_RETRY_S = 0.05


def check_compaction_of(rows: Sequence[Row], produced: Produced, end: int, where: str) -> None:
    """`rows` are a compaction of what was produced below offset `end`, for a topic
    without tombstones: each row is a produced record at its offset, offsets strictly
    increase, and each produced record below `end` that is not there has a later record
    of its key that is (so no key loses its last value, and nothing is lost that a
    cleaning did not replace)."""
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(set(offsets)), f"{where}: offsets strictly increase"
    last_of_key: dict[bytes, int] = {}
    for offset, key, value in rows:
        assert produced.get(offset) == (key, value), f"{where}: offset {offset} holds {key!r}"
        last_of_key[key] = offset
    present = set(offsets)
    lost = [
        offset
        for offset, (key, _) in produced.items()
        if offset < end and offset not in present and last_of_key.get(key, -1) < offset
    ]
    assert not lost, f"{where}: records lost with no later record of their key: {lost[:5]}"


def segment_rows(directory: Path, suffix: str = LOG_SUFFIX) -> list[Row]:
    """The records of a partition directory's files ending in `suffix`, in offset order."""
    rows: list[Row] = []
    for path in sorted(directory.glob(f"*{suffix}")):
        rows += batch_rows(path.read_bytes())
    return rows


def batch_rows(data: bytes) -> list[Row]:
    """The records of batches laid end to end; a batch cut short at the end (an append
    in flight when the bytes were read) is left out."""
    rows: list[Row] = []
    for header, batch in iter_batches(data, allow_partial_tail=True):
        payload = decode_payload(batch)
        keys = payload.column("key").to_pylist()
        values = payload.column("value").to_pylist()
        rows += [
            (header.base_offset + n, key, value)
            for n, (key, value) in enumerate(zip(keys, values, strict=True))
        ]
    return rows


def live_replica_rows(directory: Path, timeout_s: float = READ_TIMEOUT_S) -> list[Row]:
    """A running replica's records, read from its segment files between two swaps of
    cleaned segments: a read is taken again when a swap was under way (its manifest
    there) or a file went or came while reading."""
    deadline = time.monotonic() + timeout_s
    while True:
        before = _segment_names(directory)
        if not any(name.endswith(SWAP_SUFFIX) for name in before):
            try:
                rows = segment_rows(directory)
            except FileNotFoundError:
                rows = None
            if rows is not None and _segment_names(directory) == before:
                return rows
        assert time.monotonic() < deadline, f"{directory}: no read between swaps"
        time.sleep(LIVE_READ_RETRY_S)


def _segment_names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.name.endswith((LOG_SUFFIX, SWAP_SUFFIX))}


def children_of(pid: int | None) -> list[int]:
    """The processes whose parent is `pid`, from /proc."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has exited: its parent has not reaped it yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def all_gone(pids: list[int]) -> tuple[bool, object]:
    running = [pid for pid in pids if alive(pid)]
    return not running, running
