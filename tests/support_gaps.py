"""A real log with gaps in its offsets, as a compacted log has, for the tests of its
readers (tests/integration/test_offset_gaps.py, tests/spark/test_read_offset_gaps.py).

The gaps are made on a real broker's disk: a topic that rolls a segment per batch is
written, the broker is stopped cleanly, the segments of some batches are removed (what
the cleaner leaves after it dropped every record of those batches) and an empty active
segment is put at the log end (the last batches are gone too, as when the log rolled and
the cleaner emptied the segment before it), and the broker is started again on that log.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spark_replica.client import EARLIEST, LATEST, Cluster, list_offsets
from spark_replica.topics import TopicPartition
from tests.support import BrokerFactory, create_topic, produce, run

TOPIC = "gappy"
BATCHES = 10
RECORDS_PER_BATCH = 5
# Batches whose segments are removed: offsets 10..24 and 40..49 are gaps, and nothing
# follows the last one below the high watermark (50).
REMOVED_BATCHES = (2, 3, 4, 8, 9)
LOG_END = BATCHES * RECORDS_PER_BATCH
READ_TIMEOUT_S = 30.0
# The smallest segment.bytes a topic takes: each batch gets a segment of its own.
SEGMENT_BYTES = 1024


def kept_offsets() -> list[int]:
    return [
        batch * RECORDS_PER_BATCH + n
        for batch in range(BATCHES)
        if batch not in REMOVED_BATCHES
        for n in range(RECORDS_PER_BATCH)
    ]


def value_at(offset: int) -> str:
    """A value that makes a batch more than half of SEGMENT_BYTES: two never share one."""
    return f"v{offset}:" + "x" * 30


@dataclass(frozen=True)
class GappyBroker:
    """Broker 1 of `factory`, leading the one partition of TOPIC, whose log has gaps."""

    factory: BrokerFactory

    @property
    def address(self) -> str:
        return self.factory.brokers[1].address

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return self.factory.bootstrap


async def log_bounds(bootstrap: list[tuple[str, int]]) -> tuple[int, int]:
    """(log start, high watermark) of the partition, as its leader answers them."""
    tp = TopicPartition(TOPIC, 0)
    cluster = Cluster(bootstrap)
    try:
        earliest = await list_offsets(cluster, [tp], EARLIEST, wait_s=READ_TIMEOUT_S)
        latest = await list_offsets(cluster, [tp], LATEST, wait_s=READ_TIMEOUT_S)
        return earliest[tp][0], latest[tp][0]
    finally:
        await cluster.close()


def remove_segments(partition_dir: Path, base_offsets: list[int]) -> None:
    """Remove the segment files (log and indexes) that start at each base offset."""
    for base in base_offsets:
        files = list(partition_dir.glob(f"{base:020d}.*"))
        assert any(f.suffix == ".log" for f in files), f"no segment at {base} in {partition_dir}"
        for file in files:
            file.unlink()


def start_gappy_broker(factory: BrokerFactory) -> GappyBroker:
    """Start broker 1 of `factory` with TOPIC written, then its gaps made (see above)."""
    broker = factory.start(1)
    run(create_topic(factory.bootstrap, TOPIC, **{"segment.bytes": str(SEGMENT_BYTES)}))
    for batch in range(BATCHES):
        first = batch * RECORDS_PER_BATCH
        values = [value_at(first + n) for n in range(RECORDS_PER_BATCH)]
        run(produce(factory.bootstrap, TOPIC, values))
    broker.stop()
    partition_dir = broker.log_dir / f"{TOPIC}-0"
    remove_segments(partition_dir, [batch * RECORDS_PER_BATCH for batch in REMOVED_BATCHES])
    (partition_dir / f"{LOG_END:020d}.log").touch()
    factory.start(1)
    assert run(log_bounds(factory.bootstrap)) == (0, LOG_END), "the gaps are inside the log"
    return GappyBroker(factory)


@contextlib.contextmanager
def running_gappy_broker(zookeeper_connect: str, directory: Path) -> Iterator[GappyBroker]:
    """A gappy broker under a chroot of its own, stopped on leaving."""
    factory = BrokerFactory(f"{zookeeper_connect}/test-{uuid.uuid4().hex[:12]}", directory)
    try:
        yield start_gappy_broker(factory)
    finally:
        factory.stop_all()
