"""The log cleaner in a real broker: a compacted topic keeps the last value per key.

One broker for the module. The topic's segments are small so that most of the log is
sealed and cleanable; the cleaner backs off 200 ms and tombstones expire after two
seconds, so the whole life of a key (values, tombstone, removal) fits in a test.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from brokerd.log.checkpoint import read_offsets_checkpoint
from brokerd.log.cleaner_checkpoint import CLEANER_CHECKPOINT_FILE
from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.errors import InvalidRecordError
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from tests.support import BrokerFactory, create_topic, rows_of, run
from tests.support_compaction import all_gone, check_compaction_of, children_of, read_natively

pytestmark = pytest.mark.slow

KEYS = 100
RECORDS = 10_000
TOMBSTONED = KEYS // 2
DELETE_RETENTION_MS = 2_000
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "16384",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
}


@pytest.fixture(scope="module")
def broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        Path(tmp_path_factory.mktemp("compaction")),
    )
    try:
        yield factory.start(1, **{"log.cleaner.backoff.ms": "200"})
    finally:
        factory.stop_all()


def key(number: int) -> str:
    return f"k{number:03d}"


async def fill(bootstrap: list[tuple[str, int]], topic: str) -> dict[str, tuple[int, str]]:
    """10k values over 100 keys, then tombstones for half of them, then enough records
    of another key to seal the segment holding the tombstones; each key's last value."""
    await create_topic(bootstrap, topic, **TOPIC_CONFIGS)
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(batch_records=100))
        keys = [key(i % KEYS) for i in range(RECORDS)]
        values = [f"{k}-v{i}" for i, k in enumerate(keys)]
        sent = await producer.send_records(topic, values, keys, partition=0)
        tombstones = [key(i) for i in range(TOMBSTONED)]
        await producer.send_records(topic, [None] * TOMBSTONED, tombstones, partition=0)
        filler = ["x" * 100] * 300
        await producer.send_records(topic, filler, ["filler"] * len(filler), partition=0)
        await producer.close()
    finally:
        await cluster.close()
    last = {k: (m.offset, v) for k, v, m in zip(keys, values, sent, strict=True)}
    return {k: last[k] for k in last if int(k[1:]) >= TOMBSTONED}


async def read_to_end(bootstrap: list[tuple[str, int]], topic: str) -> list[dict[str, object]]:
    """Every record from the log start to the high watermark, stepping over offset gaps."""
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning()
        end = (await consumer.list_offsets([tp], LATEST_TIMESTAMP))[tp][0]
        fetched = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            fetched += await consumer.poll(max_wait_ms=200)
        assert consumer.position(tp) == end, "read to the high watermark in time"
        return rows_of(fetched)
    finally:
        await cluster.close()


def read_keys(broker: BrokerProcess, topic: str) -> dict[str, list[tuple[int, bytes | None]]]:
    """Every record of the topic's keys k000..k099, by key, in offset order."""
    rows = run(read_to_end([(broker.host, broker.port)], topic))
    by_key: dict[str, list[tuple[int, bytes | None]]] = {}
    for row in rows:
        name = row["key"].decode()
        if name != "filler":
            by_key.setdefault(name, []).append((row["offset"], row["value"]))
    return by_key


def wait_for(check: Callable[[], tuple[bool, object]], what: str, timeout_s: float = 60.0) -> None:
    """Until `check` says done; it also says what it saw, for the failure message."""
    deadline = time.monotonic() + timeout_s
    last: tuple[bool, object] = (False, None)
    while time.monotonic() < deadline:
        last = check()
        if last[0]:
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not reached in {timeout_s} s; last seen: {last[1]}")


def test_cleaning_keeps_each_live_keys_last_value_at_its_offset_and_drops_tombstones_later(
    broker: BrokerProcess,
) -> None:
    topic = "cdc-upserts"
    live = run(fill([(broker.host, broker.port)], topic))
    expected_live = {k: [(offset, value.encode())] for k, (offset, value) in live.items()}

    def cleaned_once() -> tuple[bool, object]:
        by_key = read_keys(broker, topic)
        current = {k: v for k, v in by_key.items() if k in live}
        tombstoned = {k: v for k, v in by_key.items() if k not in live}
        done = current == expected_live and all(
            len(records) == 1 and records[0][1] is None for records in tombstoned.values()
        )
        return done, {k: v for k, v in list(by_key.items())[:3]}

    started = time.monotonic()
    wait_for(cleaned_once, "live keys down to their last value")

    def tombstones_gone() -> tuple[bool, object]:
        by_key = read_keys(broker, topic)
        return by_key == expected_live, sorted(set(by_key) - set(expected_live))[:5]

    wait_for(tombstones_gone, "tombstoned keys gone")
    assert time.monotonic() - started >= DELETE_RETENTION_MS / 1000 * 0.5

    checkpoint = read_offsets_checkpoint(broker.log_dir / CLEANER_CHECKPOINT_FILE)
    assert checkpoint[TopicPartition(topic, 0)] > max(o for o, _ in live.values())
    files = sorted(p.name for p in (broker.log_dir / f"{topic}-0").iterdir())
    assert not [name for name in files if name.endswith((".cleaned", ".swap"))]


def test_a_delete_topic_keeps_its_segments_past_the_cleaners_reach(broker: BrokerProcess) -> None:
    """cleanup.policy=delete: the cleaner leaves the log alone, every record stays."""
    topic = "plain-delete"
    bootstrap = [(broker.host, broker.port)]

    async def fill_plain() -> None:
        await create_topic(bootstrap, topic, **{**TOPIC_CONFIGS, "cleanup.policy": "delete"})
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(batch_records=100))
            await producer.send_records(topic, ["v"] * 2000, ["same"] * 2000, partition=0)
            await producer.close()
        finally:
            await cluster.close()

    run(fill_plain())
    time.sleep(1.0)
    rows = run(read_to_end(bootstrap, topic))
    assert [row["offset"] for row in rows] == list(range(2000))


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]

    async def produce_keyless() -> None:
        await create_topic(bootstrap, "keyed-only", **TOPIC_CONFIGS)
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(delivery_timeout_ms=10_000))
            await producer.send_records("keyed-only", ["v"], [None], partition=0)
        finally:
            await cluster.close()

    with pytest.raises(InvalidRecordError, match=r"compacted.*every record needs a key"):
        run(produce_keyless())


CRASH_ROUNDS = 3
CRASH_KEYS = 200


def test_sigkill_during_cleaning_leaves_a_log_that_is_old_or_new_and_producers_go_on(
    broker: BrokerProcess,
) -> None:
    """Last in the module: it restarts the broker, throttled so that cleanings take
    seconds, and kills it at seeded random moments while its log is being cleaned.

    After each restart every record read is one that was produced, at its offset (old
    or cleaned, never mixed or damaged), each key's last value is there, and the same
    idempotent producer goes on producing without an out-of-order refusal.
    """
    topic = "crash-compact"
    broker.overrides["log.cleaner.io.max.bytes.per.second"] = "300000"
    broker.stop()
    broker.start()
    bootstrap = [(broker.host, broker.port)]
    rng = random.Random(27)
    produced: dict[int, tuple[bytes, bytes | None]] = {}

    async def scenario() -> None:
        await create_topic(bootstrap, topic, **TOPIC_CONFIGS)
        cluster = Cluster(bootstrap)
        producer = Producer(cluster, ProducerConfig(batch_records=100, delivery_timeout_ms=60_000))
        try:
            for round_number in range(CRASH_ROUNDS):
                keys = [key(i % CRASH_KEYS) for i in range(4_000)]
                values = [f"r{round_number}-{i}" for i in range(len(keys))]
                sent = await producer.send_records(topic, values, keys, partition=0)
                produced.update(
                    {
                        m.offset: (k.encode(), v.encode())
                        for k, v, m in zip(keys, values, sent, strict=True)
                    }
                )
                time.sleep(rng.uniform(0.2, 2.5))
                workers = children_of(broker.pid)
                broker.kill()
                # A cleaner worker dies with its broker: one still writing `.cleaned`
                # files would write into the next cleaning's.
                wait_for(
                    partial(all_gone, workers),
                    "the killed broker's cleaner workers to die with it",
                    timeout_s=10,
                )
                broker.start()
                check_compaction_of(
                    await read_natively(bootstrap, topic),
                    produced,
                    max(produced) + 1,
                    f"after restart {round_number + 1}",
                )
            filler = ["x" * 100] * 300
            await producer.send_records(topic, filler, ["filler"] * len(filler), partition=0)
        finally:
            await producer.close()
            await cluster.close()

    run(scenario(), timeout_s=300)
    last = {k.decode(): (offset, v) for offset, (k, v) in sorted(produced.items())}
    expected = {k: [(offset, v)] for k, (offset, v) in last.items()}

    def converged() -> tuple[bool, object]:
        by_key = read_keys(broker, topic)
        return by_key == expected, sum(len(v) for v in by_key.values())

    wait_for(converged, "the crashed log cleaned to the last value per key", timeout_s=90)
    leftovers = [p.name for p in (broker.log_dir / f"{topic}-0").iterdir()]
    assert not [n for n in leftovers if n.endswith((".cleaned", ".swap", ".tmp"))]
