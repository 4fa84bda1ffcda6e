"""SIGKILL of brokers in the middle of cleaning a compacted topic replicated three times.

Three brokers for the module and one partition with a replica on each. The cleaners are
throttled (log.cleaner.io.max.bytes.per.second) so that a cleaning takes a second or
more. Each round, one idempotent producer (the same for the whole test) writes a chunk of
values cycling over KEYS keys; then the round's broker (a seeded shuffle giving each
broker as many rounds) is waited for until it is cleaning, its partition directory
holding `.cleaned` files, and SIGKILLed a seeded random moment later, or, in about a
third of the rounds, the moment its swap's manifest shows (a swap takes milliseconds, so
a delay would hardly ever fall in one).

What the kill left on disk is then checked as the restarted broker will see it: a copy
of the partition directory is opened with the broker's own log code (Log.open finishes a
committed swap and drops the files of an uncommitted one). It must be the old log or the
new one, never a mix: with no swap manifest among the files, exactly the records of the
old segments; with one, exactly those of the new log the manifest describes (each group
of old segments replaced by its cleaned segment, the segments after them unchanged).
Nothing the cleaning could not reach is lost: every acknowledged record from the active
segment on is there, and every record missing has a later record of its key. Then the
broker starts again and each replica, read from its files, must be a compaction of what
was produced. At the end, with every broker up, the three replicas converge to the last
value of each key at the offset its producer was acknowledged.

A kill counts as inside a cleaning when the files it left hold `.cleaned` files or a
swap manifest; most kills must. How many fell inside a swap varies from run to run and
is not asserted; the swap's steps one by one are tests/unit/test_cleaner_segments.py's.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.log.cleaner_swap import CLEANED_SUFFIX, MANIFEST_MAGIC, SWAP_SUFFIX
from brokerd.log.segment import LOG_SUFFIX, segment_file
from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.records import now_ms
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import BrokerFactory, create, eventually, run, start_cluster, wait_until
from tests.support_compaction import (
    Produced,
    Row,
    all_gone,
    batch_rows,
    check_compaction_of,
    children_of,
    live_replica_rows,
    segment_rows,
)

pytestmark = pytest.mark.slow

TOPIC = "replicated-crash-table"
PARTITION_DIR = f"{TOPIC}-0"
BROKERS = (1, 2, 3)
KILLS_PER_BROKER = 4
SEED = 33
KEYS = 200
ROUND_RECORDS = 2_000
BATCH_RECORDS = 100
FILLER_KEY = b"filler"
SEGMENT_BYTES = 16_384
# About 60 KB of dirty segments a round: a cleaning rewrites them for a second or more.
CLEANER_IO_BYTES_PER_S = 50_000
KILL_DELAY_MAX_S = 1.0
AT_SWAP_SHARE = 0.3  # of the kills, aimed at the swap itself rather than a delay
CLEANING_START_TIMEOUT_S = 15.0
INSIDE_CLEANING_SHARE = 0.75
CONVERGE_TIMEOUT_S = 60.0
CLEANING_POLL_S = 0.01
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(SEGMENT_BYTES),
    "min.cleanable.dirty.ratio": "0.01",
}
CLEANER_OVERRIDES = {
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.io.max.bytes.per.second": str(CLEANER_IO_BYTES_PER_S),
}

# (key, value) by offset, added to as the producer is acknowledged.
Acknowledged = dict[int, tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class Kill:
    broker_id: int
    inside_cleaning: bool  # `.cleaned` files or a swap manifest were on disk
    committed: bool  # a swap manifest was: the crash came during the swap itself


@pytest.fixture(scope="module")
def brokers(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("compaction-crashes"),
    )
    try:
        start_cluster(factory, **CLEANER_OVERRIDES)
        yield factory
    finally:
        factory.stop_all()


def partition_dir(brokers: BrokerFactory, broker_id: int) -> Path:
    return brokers.brokers[broker_id].log_dir / PARTITION_DIR


def cleaning_files(directory: Path) -> list[str]:
    """The files of a cleaning under way: cleaned segments, or a swap manifest."""
    try:
        names = [path.name for path in directory.iterdir()]
    except FileNotFoundError:
        return []
    return [name for name in names if name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]


def wait_for_swap(directory: Path) -> None:
    """Until the cleaning under way commits its swap (its manifest shows) or ends.

    A swap takes milliseconds: the directory is read again and again without a pause."""
    deadline = time.monotonic() + CLEANING_START_TIMEOUT_S
    while time.monotonic() < deadline:
        names = [entry.name for entry in os.scandir(directory)]
        if any(name.endswith(SWAP_SUFFIX) for name in names) or not any(
            name.endswith(CLEANED_SUFFIX) for name in names
        ):
            return


def wait_for_cleaning(directory: Path) -> bool:
    """Whether a cleaning of the directory's log began within CLEANING_START_TIMEOUT_S."""
    deadline = time.monotonic() + CLEANING_START_TIMEOUT_S
    while not cleaning_files(directory):
        if time.monotonic() > deadline:
            return False
        time.sleep(CLEANING_POLL_S)
    return True


def recovered_rows(image: Path) -> list[Row]:
    """The records of a crashed log's files once opened as a restarted broker opens them."""
    log = Log.open(
        image, LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy="compact"), now_ms=now_ms()
    )
    try:
        return batch_rows(log.read(log.log_start_offset, 1 << 30))
    finally:
        log.close()


def check_crash_image(image: Path, produced: Produced, where: str) -> tuple[bool, bool]:
    """Check what a kill left in the partition directory copied to `image` (see above);
    whether a cleaning was under way, and whether its swap was committed."""
    on_disk = cleaning_files(image)
    manifests = sorted(image.glob(f"*{SWAP_SUFFIX}"))
    old = segment_rows(image)
    new = new_log_rows(image, manifests[0], old) if manifests else None
    bases = segment_bases(image)
    recovered = recovered_rows(image)
    if new is None:
        assert recovered == old, f"{where}: no swap committed, the old log stays as it was"
    else:
        assert recovered == new, f"{where}: a swap committed, the whole new log is there"
    tail = {offset for offset in produced if offset >= bases[-1]}
    assert tail <= {row[0] for row in recovered}, f"{where}: the active segment is whole"
    check_compaction_of(recovered, produced, max(produced) + 1, where)
    return bool(on_disk), bool(manifests)


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(path.name.split(".")[0]) for path in directory.glob(f"*{LOG_SUFFIX}"))


def new_log_rows(image: Path, manifest: Path, old: list[Row]) -> list[Row]:
    """The records of the log a committed swap leaves once finished, from the files of
    a crash during it: each group of the manifest (a line of the base offsets of the
    segments it replaces, the first naming the new one) is its cleaned segment, still
    `.cleaned` or already renamed; the segments after the last group are as they were."""
    lines = manifest.read_text(encoding="utf-8").splitlines()
    assert lines[0] == MANIFEST_MAGIC, f"{manifest.name}: {lines[:1]}"
    groups = [[int(base) for base in line.split()] for line in lines[1:]]
    after = min(base for base in segment_bases(image) if base > groups[-1][-1])
    rows = [row for row in old if row[0] < groups[0][0]]
    for group in groups:
        final = segment_file(image, group[0], LOG_SUFFIX)
        cleaned = segment_file(image, group[0], LOG_SUFFIX + CLEANED_SUFFIX)
        rows += batch_rows((cleaned if cleaned.exists() else final).read_bytes())
    return rows + [row for row in old if row[0] >= after]


def replica_end(directory: Path) -> int:
    """The offset after a running replica's last record."""
    rows = live_replica_rows(directory)
    return rows[-1][0] + 1 if rows else 0


def kill_while_cleaning(
    brokers: BrokerFactory,
    broker_id: int,
    produced: Produced,
    delay_s: float | None,
    image: Path,
) -> Kill:
    """Wait until the broker holds every record produced and is cleaning, SIGKILL it
    `delay_s` later (None: when its swap begins), check what it left (copied to
    `image`), and start it again."""
    directory = partition_dir(brokers, broker_id)
    end = max(produced) + 1
    wait_until(lambda: replica_end(directory) >= end, f"broker {broker_id} to hold {end - 1}")
    broker = brokers.brokers[broker_id]
    cleaning = wait_for_cleaning(directory)
    # Listed before the wait for the kill's moment: reading /proc takes milliseconds.
    workers = children_of(broker.pid)
    if cleaning and delay_s is None:
        wait_for_swap(directory)
    elif cleaning and delay_s is not None:
        time.sleep(delay_s)
    broker.kill()
    # A cleaner worker dies with its broker; one still writing would change the files.
    wait_until(lambda: all_gone(workers)[0], f"broker {broker_id}'s cleaner workers to die")
    shutil.copytree(directory, image)
    inside, committed = check_crash_image(image, produced, f"{image.name} after the kill")
    brokers.start(broker_id)
    return Kill(broker_id, inside, committed)


async def produce_round(producer: Producer, number: int, produced: Acknowledged) -> None:
    keys = [f"k{i % KEYS:03d}".encode() for i in range(ROUND_RECORDS)]
    values = [f"r{number}-{i}".encode() for i in range(ROUND_RECORDS)]
    sent = await producer.send_records(TOPIC, values, keys, partition=0)
    produced.update({m.offset: (k, v) for k, v, m in zip(keys, values, sent, strict=True)})


async def kill_rounds(
    brokers: BrokerFactory, produced: Acknowledged, scratch: Path, rng: random.Random
) -> list[Kill]:
    """The rounds, then filler records of another key to seal the last keyed segment."""
    await create(brokers.bootstrap, TOPIC, rf=3, **TOPIC_CONFIGS)
    targets = [broker_id for broker_id in BROKERS for _ in range(KILLS_PER_BROKER)]
    rng.shuffle(targets)
    cluster = Cluster(brokers.bootstrap)
    producer = Producer(
        cluster, ProducerConfig(batch_records=BATCH_RECORDS, delivery_timeout_ms=60_000)
    )
    kills = []
    try:
        for number, broker_id in enumerate(targets):
            await produce_round(producer, number, produced)
            at_swap = rng.random() < AT_SWAP_SHARE
            delay_s = None if at_swap else rng.uniform(0, KILL_DELAY_MAX_S)
            kills.append(
                await asyncio.to_thread(
                    kill_while_cleaning,
                    brokers,
                    broker_id,
                    produced,
                    delay_s,
                    scratch / f"round-{number}-broker-{broker_id}",
                )
            )
            for replica in BROKERS:
                rows = await asyncio.to_thread(live_replica_rows, partition_dir(brokers, replica))
                end = rows[-1][0] + 1 if rows else 0
                check_compaction_of(rows, produced, end, f"round {number}, broker {replica}")
        filler = [b"x" * 100] * 300
        sent = await producer.send_records(TOPIC, filler, [FILLER_KEY] * len(filler), partition=0)
        produced.update(
            {m.offset: (FILLER_KEY, value) for value, m in zip(filler, sent, strict=True)}
        )
    finally:
        await producer.close()
        await cluster.close()
    return kills


def keyed_rows(brokers: BrokerFactory, broker_id: int) -> list[Row]:
    rows = live_replica_rows(partition_dir(brokers, broker_id))
    return [row for row in rows if row[1] != FILLER_KEY]


def test_replicas_killed_while_cleaning_recover_old_or_new_and_converge(
    brokers: BrokerFactory, tmp_path: Path
) -> None:
    produced: Acknowledged = {}
    kills = run(kill_rounds(brokers, produced, tmp_path, random.Random(SEED)), timeout_s=240)

    assert len(kills) == len(BROKERS) * KILLS_PER_BROKER
    inside = [kill for kill in kills if kill.inside_cleaning]
    assert len(inside) >= INSIDE_CLEANING_SHARE * len(kills), f"inside cleanings: {kills}"
    assert {kill.broker_id for kill in inside} == set(BROKERS)

    last = {key: (offset, key, value) for offset, (key, value) in sorted(produced.items())}
    expected = sorted(row for key, row in last.items() if key != FILLER_KEY)
    for broker_id in BROKERS:
        eventually(
            partial(converged, brokers, broker_id, expected),
            f"broker {broker_id} cleaned to the last value of each key, no cleaning left",
            CONVERGE_TIMEOUT_S,
        )


def converged(brokers: BrokerFactory, broker_id: int, expected: list[Row]) -> bool:
    directory = partition_dir(brokers, broker_id)
    return keyed_rows(brokers, broker_id) == expected and not cleaning_files(directory)
