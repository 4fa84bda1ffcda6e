"""The log cleaner's speed, and what it costs producers on the same broker; one JSON line.

Starts an embedded ZooKeeper and one broker (``_cluster.local_cluster``) and stops both,
each by its own PID, at the end. The run has four steps:

1. With the cleaner off (``log.cleaner.enable=false``), a compacted topic of
   ``--segment-mb`` segments gets ``--dirty-mb`` of records whose keys cycle over
   ``--keys`` keys (values of ``--record-bytes`` random bytes), so that nearly all of it
   is superseded. A plain topic (``cleanup.policy=delete``) is created for the producer.
2. The broker is stopped and started again with the cleaner on (backoff 100 ms; with
   ``--cleaner-io-mb-per-s``, log.cleaner.io.max.bytes.per.second as well). The
   dirty log is every sealed segment of the compacted topic: ``dirty_bytes`` is the size
   of their ``.log`` files, and the cleaning is done when the broker's
   ``cleaner-offset-checkpoint`` says the partition is clean up to the active segment.
3. While it cleans, batches of unkeyed records go to the plain topic, ``--in-flight`` at a
   time, until the cleaning is done or ``--produce-seconds`` have passed, whichever is
   first (``cleaning_overlap_s``; ``cleaner_busy_throughout`` says the cleaning outlasted
   the producing). Then the script waits for the cleaning to end.
4. The cleaner now idle, the same batches go to the plain topic for as long again.

``cleaner_mb_per_s`` is ``dirty_bytes`` over ``cleaning_s``, the wall time from the broker
being up again (registered in ZooKeeper) to the checkpoint covering the dirty log: it
counts the whole job as an operator sees it (opening the log, up to one backoff, reading,
planning, writing and swapping the cleaned segments, the checkpoint) while the producer
of step 3 competes for the machine, not the rate of the copy loop alone. It reads the
checkpoint file every 20 ms, so it is at most that late. ``cleaned_bytes`` is what the
sealed segments hold afterwards. ``produce_mb_per_s_while_cleaning`` and
``produce_mb_per_s_without`` count acknowledged record value bytes (1 MB = 1e6 bytes);
``produce_ratio_while_cleaning`` is the first over the second (goal >= 0.8, issue 27).
``broker_cpu_s_*`` are the broker's CPU seconds (user + system) in each produce phase and
``client_cpu_s_*`` this process's: on two cores shared by cleaner, broker and client the
ratio is bounded by CPU, not by the cleaner's design. ``load_avg_before`` and
``load_avg_after`` are the machine's 1-minute load averages.

Run from the repository root::

    .venv/bin/python benchmarks/compaction.py
    .venv/bin/python benchmarks/compaction.py --dirty-mb 400 --keys 100000 --produce-seconds 3
    .venv/bin/python benchmarks/compaction.py --cleaner-io-mb-per-s 20
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from _cluster import local_cluster
from _common import MB, emit, positive_float, positive_int, process_cpu_seconds
from produce import build_batches

from brokerd.log import read_offsets_checkpoint
from brokerd.log.cleaner_checkpoint import CLEANER_CHECKPOINT_FILE
from spark_replica.client import Admin, Cluster, Producer
from spark_replica.records import encode_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition

COMPACTED_TOPIC = "compacted"
PLAIN_TOPIC = "plain"
BATCH_RECORDS = 1_000
CLEANER_OFF = {"log.cleaner.enable": "false"}
IO_MAX_KEY = "log.cleaner.io.max.bytes.per.second"
CHECKPOINT_POLL_S = 0.02
CLEANING_TIMEOUT_S = 600.0
SETUP_TIMEOUT_S = 600.0
PRODUCE_BATCHES = 64  # distinct batches the producer cycles through
KEY_BYTES = 12  # "key-" and eight digits


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dirty-mb", type=positive_int, default=1000, help="dirty (1000)")
    parser.add_argument("--keys", type=positive_int, default=10_000, help="distinct keys (10k)")
    parser.add_argument("--record-bytes", type=positive_int, default=100, help="value (100)")
    parser.add_argument("--segment-mb", type=positive_int, default=16, help="segment size (16)")
    parser.add_argument(
        "--produce-seconds", type=positive_float, default=5.0, help="each produce phase (5)"
    )
    parser.add_argument("--in-flight", type=positive_int, default=8, help="requests out (8)")
    parser.add_argument(
        "--cleaner-io-mb-per-s",
        type=positive_float,
        default=None,
        help="log.cleaner.io.max.bytes.per.second, in MB/s (default: unthrottled, as Kafka's)",
    )
    return parser.parse_args(argv)


def cleaner_on(args: argparse.Namespace) -> dict[str, str]:
    """The broker configs of the cleaning restart."""
    configs = {"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "100"}
    if args.cleaner_io_mb_per_s is not None:
        configs[IO_MAX_KEY] = str(int(args.cleaner_io_mb_per_s * MB))
    return configs


def keyed_batches(keys: int, record_bytes: int) -> list[memoryview]:
    """Batches of BATCH_RECORDS records whose keys, batch after batch, cycle over `keys`
    keys; just enough of them that sending the list round and round keeps that cycle."""
    count = keys // math.gcd(keys, BATCH_RECORDS)
    data = os.urandom(BATCH_RECORDS * record_bytes)
    values = pa.array(
        [data[n * record_bytes : (n + 1) * record_bytes] for n in range(BATCH_RECORDS)],
        pa.binary(),
    )
    batches = []
    for index in range(count):
        first = index * BATCH_RECORDS
        names = [f"key-{(first + n) % keys:08d}".encode() for n in range(BATCH_RECORDS)]
        records = pa.record_batch([pa.array(names, pa.binary()), values], names=["key", "value"])
        batches.append(encode_batch(records))
    return batches


async def fill_dirty_log(
    bootstrap: list[tuple[str, int]], args: argparse.Namespace
) -> tuple[int, int]:
    """Create both topics and write the dirty log; return its records and value bytes."""
    cluster = Cluster(bootstrap)
    try:
        admin = Admin(cluster)
        configs = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_mb * MB)}
        await admin.create_topic(COMPACTED_TOPIC, 1, 1, configs)
        await admin.create_topic(PLAIN_TOPIC, 1, 1)
        batches = keyed_batches(args.keys, args.record_bytes)
        per_batch = BATCH_RECORDS * (args.record_bytes + KEY_BYTES)
        total = max(1, args.dirty_mb * MB // per_batch)
        producer = Producer(cluster)
        await send_cycling(producer, COMPACTED_TOPIC, batches, total, args.in_flight)
        await producer.close()
    finally:
        await cluster.close()
    return total * BATCH_RECORDS, total * BATCH_RECORDS * args.record_bytes


async def send_cycling(
    producer: Producer, topic: str, batches: Sequence[memoryview], total: int, in_flight: int
) -> None:
    """Send `total` batches, cycling through `batches` in order, `in_flight` at a time."""
    jobs = iter(range(total))

    async def sender() -> None:
        for index in jobs:
            await producer.send_batch(topic, 0, batches[index % len(batches)])

    await asyncio.gather(*(sender() for _ in range(min(in_flight, total))))


def sealed_segments(partition_dir: Path) -> tuple[list[Path], int]:
    """The sealed segments' log files of a partition, and the active segment's base offset."""
    logs = sorted(partition_dir.glob("*.log"))
    return logs[:-1], int(logs[-1].stem)


def cleaned_up_to(broker: BrokerProcess) -> int:
    """Where the broker's cleaner checkpoint says the compacted partition is clean to."""
    path = broker.log_dir / CLEANER_CHECKPOINT_FILE
    if not path.exists():
        return 0
    return read_offsets_checkpoint(path).get(TopicPartition(COMPACTED_TOPIC, 0), 0)


async def wait_cleaned(broker: BrokerProcess, target: int, timeout_s: float) -> float:
    """Poll the checkpoint until it reaches `target`; return when (perf_counter)."""
    deadline = time.perf_counter() + timeout_s
    while cleaned_up_to(broker) < target:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"the log was not cleaned to offset {target} in {timeout_s} s")
        await asyncio.sleep(CHECKPOINT_POLL_S)
    return time.perf_counter()


async def produce_until(
    producer: Producer,
    batches: Sequence[bytes],
    in_flight: int,
    deadline: float,
    stop: asyncio.Future[float] | None = None,
) -> int:
    """Send batches to the plain topic until `deadline` or `stop` is done; return how
    many were acknowledged."""
    acknowledged = 0

    def running() -> bool:
        return time.perf_counter() < deadline and not (stop is not None and stop.done())

    async def sender(first: int) -> None:
        nonlocal acknowledged
        index = first
        while running():
            await producer.send_batch(PLAIN_TOPIC, 0, batches[index % len(batches)])
            acknowledged += 1
            index += in_flight

    await asyncio.gather(*(sender(n) for n in range(in_flight)))
    return acknowledged


@dataclass(frozen=True)
class ProducePhase:
    """What one produce phase did; `cut_short`: the cleaning ended it before its time."""

    batches: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    cut_short: bool

    def value_mb_per_s(self, record_bytes: int) -> float:
        return self.batches * BATCH_RECORDS * record_bytes / MB / self.seconds


def cpu_seconds(pid: int) -> float:
    return sum(process_cpu_seconds(pid))


def client_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


async def produce_phase(
    bootstrap: list[tuple[str, int]],
    pid: int,
    batches: Sequence[bytes],
    args: argparse.Namespace,
    seconds: float,
    stop: asyncio.Future[float] | None = None,
) -> ProducePhase:
    """One timed produce phase, on a producer warmed up by one batch."""
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster)
        await producer.send_batch(PLAIN_TOPIC, 0, batches[0])
        broker_cpu, client_cpu = cpu_seconds(pid), client_cpu_seconds()
        started = time.perf_counter()
        sent = await produce_until(producer, batches, args.in_flight, started + seconds, stop)
        elapsed = time.perf_counter() - started
        figures = ProducePhase(
            batches=sent,
            seconds=elapsed,
            broker_cpu_s=cpu_seconds(pid) - broker_cpu,
            client_cpu_s=client_cpu_seconds() - client_cpu,
            cut_short=stop is not None and stop.done(),
        )
        await producer.close()
        return figures
    finally:
        await cluster.close()


async def clean_while_producing(
    broker: BrokerProcess, batches: Sequence[bytes], args: argparse.Namespace, target: int
) -> tuple[float, ProducePhase]:
    """Restart the broker with the cleaner on and produce while it cleans; return the
    cleaning's seconds and the produce phase's figures."""
    broker.overrides.update(cleaner_on(args))
    broker.start()
    up = time.perf_counter()
    assert broker.pid is not None
    bootstrap = [(broker.host, broker.port)]
    cleaned = asyncio.ensure_future(wait_cleaned(broker, target, CLEANING_TIMEOUT_S))
    try:
        figures = await produce_phase(
            bootstrap, broker.pid, batches, args, args.produce_seconds, cleaned
        )
        return await cleaned - up, figures
    finally:
        cleaned.cancel()


def run(args: argparse.Namespace) -> dict[str, object]:
    load_before = round(os.getloadavg()[0], 2)
    plain_batches, _ = build_batches(
        PRODUCE_BATCHES * BATCH_RECORDS, args.record_bytes, BATCH_RECORDS
    )
    with local_cluster(1, overrides=CLEANER_OFF) as cluster:
        (broker,) = cluster.brokers
        fill = fill_dirty_log(cluster.bootstrap, args)
        records, value_bytes = asyncio.run(asyncio.wait_for(fill, SETUP_TIMEOUT_S))
        broker.stop()
        partition_dir = broker.log_dir / f"{COMPACTED_TOPIC}-0"
        dirty, active_base = sealed_segments(partition_dir)
        dirty_bytes = sum(path.stat().st_size for path in dirty)
        cleaning_s, busy = asyncio.run(
            clean_while_producing(broker, plain_batches, args, active_base)
        )
        cleaned_bytes = sum(path.stat().st_size for path in sealed_segments(partition_dir)[0])
        assert broker.pid is not None
        idle = asyncio.run(
            produce_phase(cluster.bootstrap, broker.pid, plain_batches, args, busy.seconds)
        )
    while_cleaning = busy.value_mb_per_s(args.record_bytes)
    without = idle.value_mb_per_s(args.record_bytes)
    return {
        "bench": "compaction",
        "dirty_records": records,
        "dirty_value_bytes": value_bytes,
        "keys": args.keys,
        "record_bytes": args.record_bytes,
        "segment_mb": args.segment_mb,
        "cleaner_io_mb_per_s": args.cleaner_io_mb_per_s,
        "dirty_bytes": dirty_bytes,
        "cleaned_bytes": cleaned_bytes,
        "cleaning_s": round(cleaning_s, 3),
        "cleaner_mb_per_s": round(dirty_bytes / MB / cleaning_s, 1),
        "cleaning_overlap_s": round(busy.seconds, 3),
        "cleaner_busy_throughout": not busy.cut_short,
        "produce_mb_per_s_while_cleaning": round(while_cleaning, 1),
        "produce_mb_per_s_without": round(without, 1),
        "produce_ratio_while_cleaning": round(while_cleaning / without, 3),
        "broker_cpu_s_while_cleaning": round(busy.broker_cpu_s, 2),
        "broker_cpu_s_without": round(idle.broker_cpu_s, 2),
        "client_cpu_s_while_cleaning": round(busy.client_cpu_s, 2),
        "client_cpu_s_without": round(idle.client_cpu_s, 2),
        "load_avg_before": load_before,
        "load_avg_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    emit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
