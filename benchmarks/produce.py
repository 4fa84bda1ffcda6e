"""Produce throughput and latency against local broker processes on loopback; prints one JSON line.

Starts an embedded ZooKeeper and ``--brokers`` brokers (``_cluster.local_cluster``), creates a
topic with ``--partitions`` partitions and replication factor ``--rf``, and stops every process
at the end. With ``--rf`` above 1 and ``--acks all`` a batch is acknowledged once every
in-sync replica has it, so the figures include replication to the followers.

What is timed, and what is not:

* Building the batches is the client's job and is measured on its own, before the cluster
  starts: values are random bytes (``--record-bytes`` each) sliced zero-copy from one
  ``os.urandom`` buffer into a pyarrow binary column, and every ``--batch-records`` of them
  are encoded with ``spark_replica.records.encode_batch`` (timestamps are filled in by it).
  The rate is ``encode_records_per_s``.
  With ``--compression lz4|zstd`` the batches are built compressed (Arrow IPC buffer
  compression), so that cost is in the encoding rate, not in the timed part.
* The timed part sends all batches with ``Producer.send_batch``, at most ``--in-flight``
  requests outstanding (batches go round-robin over the partitions; order is irrelevant here),
  and ends when the broker reports every record stored: at the last answer, plus one
  ListOffsets round trip (with ``--acks 0`` the broker answers nothing, so this poll is what
  tells that everything landed). The producer keeps at most ``--max-in-flight`` of them in
  flight per partition.
* ``p50_ms``/``p99_ms``: per-request latency from ``send_batch`` call to its acknowledgement
  (with ``--acks 0``: until the request is written to the socket).
* ``--api record`` times the per-record path instead, as an application uses it: every record
  goes through ``await Producer.send(TOPIC, value)`` (no key, no partition: the producer's
  sticky partitioner spreads them) into the producer's own batches (``--batch-records``
  records, the default ``batch_size`` of 1 MB, ``--linger-ms``), encoded (and compressed)
  inside the timed part. The values are 10,000 distinct random ones, made before the clock
  starts and cycled through (an application has its values in hand; five million distinct
  ones would take gigabytes).
  Before the clock starts one record per partition is sent and acknowledged, so the figures
  are of a producer whose id, connections and leaders are settled. The sender yields to the
  event loop every 1,000 records, as an application doing other work would.
  ``p50_ms``/``p99_ms`` are then per record: every ``--latency-every``-th record (16) carries
  an ``on_delivery`` callback that times it (a callback on every record would time the
  callbacks). Without ``--rate`` records are offered as fast as ``send`` takes them, so the
  latency is mostly time spent waiting in a full ``buffer.memory``.
* ``--api sync`` times the same through ``SyncProducer.send``, called from a plain thread
  (not the event loop), with the same warm-up and latency sampling.
* ``--rate R`` (with ``--api record``) offers R records/s at a steady pace: every millisecond
  the records due by then are sent. A record's latency counts from when it was due, not from
  when ``send`` got to it, so a producer that falls behind shows it (no coordinated omission).
* ``--stall SECONDS`` (with ``--api record``) shows that memory stays bounded when the brokers
  stop answering: records are sent flat out for SECONDS, then every broker is paused (SIGSTOP)
  and records are sent until ``send`` refuses one with BufferExhaustedError, after waiting
  ``--max-block-ms`` (2,000 here). The brokers are then continued (SIGCONT) and every record
  taken is checked stored. It prints ``buffer_memory`` (``--buffer-memory``, 32 MiB),
  ``peak_buffered_bytes`` (the most the producer's buffer ever held, which must not pass
  ``buffer_memory``), ``rss_growth_bytes`` (this process's resident memory, most seen while
  paused minus just before the pause: the records' Python objects and encoded batches, which
  ``buffer_memory`` accounts by payload size), ``blocked_ms`` (how long the refused send
  waited) and ``stall_records_taken``; ``records`` is then the number taken, and the
  throughput figures describe a run with a stall in it.
* ``--security ssl|sasl_plaintext|sasl_ssl`` runs the benchmark twice in one run, each time
  on a fresh cluster with the same batches: first plaintext, then with the brokers secured as
  ``replog up --security`` secures them (TLS, SCRAM-SHA-256 for the client and SCRAM-SHA-512
  between brokers, the ACL authorizer on, the client logged in as the super user ``admin``).
  The figures are the secure run's; ``plaintext_mb_per_s`` is the first run's and
  ``ratio_to_plaintext`` the secure throughput over it (the cost of security). On a shared
  machine one run of each can differ by half either way; ``--rounds N`` alternates N
  plaintext and N secure runs and reports the median run of each. ``cpu_ms_per_mb`` is the
  CPU time the brokers and this client spent per MB of values (from topic creation to the
  last record stored), which contention on a shared machine disturbs less than wall time;
  ``cpu_ratio_to_plaintext`` is the plaintext figure over the secure one, the throughput
  ratio a machine bound by its CPU would show.
* ``--idempotent``/``--no-idempotent`` choose the producer's idempotence (default: on exactly
  when ``--acks all``, as the producer's own default), so its cost can be shown next to the plain
  figure; ``idempotent`` in the output says which ran.

Units (1 MB = 1e6 bytes): ``mb_per_s`` counts record value bytes only
(records x record_bytes / 1e6 / seconds); ``wire_mb_per_s`` counts the encoded batch bytes sent
(61-byte batch headers plus Arrow IPC payloads with keys, timestamps and offsets; request
framing excluded). ``ratio_to_loopback`` is ``wire_mb_per_s`` over the loopback TCP throughput
between two processes, measured in the same run before ZooKeeper starts.

Run from the repository root::

    .venv/bin/python benchmarks/produce.py --record-bytes 100
    .venv/bin/python benchmarks/produce.py --record-bytes 100 --brokers 3 --rf 3 --acks all
    .venv/bin/python benchmarks/produce.py --brokers 3 --rf 3 --acks all --no-idempotent
    .venv/bin/python benchmarks/produce.py --api record --linger-ms 5 --compression zstd
    .venv/bin/python benchmarks/produce.py --api record --brokers 3 --rf 3 --acks all --partitions 3
    .venv/bin/python benchmarks/produce.py --api record --brokers 3 --rf 3 --acks all \
        --partitions 3 --rate 200000
    .venv/bin/python benchmarks/produce.py --api record --brokers 3 --rf 3 --acks all \
        --partitions 3 --stall 2
    .venv/bin/python benchmarks/produce.py --brokers 3 --rf 3 --acks all --security sasl_ssl
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from collections.abc import Callable, Sequence

import pyarrow as pa
from _cluster import local_cluster
from _common import (
    MB,
    emit,
    measure_limits,
    percentile,
    positive_float,
    positive_int,
    process_cpu_seconds,
)

from brokerd.log import LogConfig
from spark_replica import event_loop
from spark_replica.client import (
    Admin,
    Cluster,
    Consumer,
    Producer,
    ProducerConfig,
    RecordMetadata,
    SyncProducer,
    parse_acks,
)
from spark_replica.client.producer_config import DEFAULT_BUFFER_MEMORY
from spark_replica.errors import BufferExhaustedError
from spark_replica.records import COMPRESSION_CODECS, encode_batch
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.cluster_dir import PLAINTEXT_MODE, SECURITY_MODES
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP

TOPIC = "bench"
DEFAULT_VALUE_BYTES = 500 * MB  # default --records: 5,000,000 records of 100 bytes
MAX_BATCH_BYTES = LogConfig().max_batch_bytes  # the broker's default batch size limit
ARROW_BYTES_PER_RECORD = 17  # value and key offsets, timestamp, validity bits: an upper bound
BATCH_OVERHEAD_BYTES = 64 * 1024  # batch header and Arrow IPC schema and metadata: ample
RUN_TIMEOUT_S = 300.0
DISTINCT_VALUES = 10_000  # --api record cycles through this many values
YIELD_EVERY = 1_000  # per-record sends between two yields to the event loop
RATE_TICK_S = 0.001  # --rate: how often the records due are sent
STALL_MAX_BLOCK_MS = 2_000
STORED_TIMEOUT_S = 60.0


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that produce.py and consume.py share."""
    parser.add_argument(
        "--record-bytes", type=positive_int, default=100, help="bytes per record value (100)"
    )
    parser.add_argument(
        "--records",
        type=positive_int,
        default=None,
        help=f"records in total (default: {DEFAULT_VALUE_BYTES // MB} MB of values, "
        "i.e. 5,000,000 records of 100 bytes)",
    )
    parser.add_argument(
        "--batch-records", type=positive_int, default=10_000, help="records per batch (10,000)"
    )
    parser.add_argument("--partitions", type=positive_int, default=1, help="partitions (1)")
    parser.add_argument(
        "--in-flight",
        type=positive_int,
        default=8,
        help="most produce requests outstanding at once (8)",
    )
    parser.add_argument(
        "--limits-seconds",
        type=positive_float,
        default=1.0,
        help="seconds for each machine-limit measurement (1.0)",
    )


def finish_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fill in the default record count and reject batches the broker would refuse."""
    if args.records is None:
        args.records = max(1, DEFAULT_VALUE_BYTES // args.record_bytes)
    per_record = args.record_bytes + ARROW_BYTES_PER_RECORD
    if args.batch_records * per_record + BATCH_OVERHEAD_BYTES > MAX_BATCH_BYTES:
        parser.error(
            f"a batch of {args.batch_records} records of {args.record_bytes} bytes would exceed "
            f"the broker's batch limit of {MAX_BATCH_BYTES} bytes; lower --batch-records"
        )


def random_values(records: int, record_bytes: int) -> pa.Buffer:
    return pa.py_buffer(os.urandom(records * record_bytes))


def build_batches(
    records: int, record_bytes: int, batch_records: int, compression: str = "none"
) -> tuple[list[bytes], float]:
    """Encode ``records`` random values into batches; return them and the encoding seconds."""
    data = random_values(records, record_bytes)
    offsets = pa.array(
        range(0, (batch_records + 1) * record_bytes, record_bytes), pa.int32()
    ).buffers()[1]
    batches = []
    started = time.perf_counter()
    for first in range(0, records, batch_records):
        count = min(batch_records, records - first)
        chunk = data.slice(first * record_bytes, count * record_bytes)
        values = pa.Array.from_buffers(pa.binary(), count, [None, offsets, chunk])
        records_batch = pa.record_batch([values], names=["value"])
        batches.append(encode_batch(records_batch, compression=compression))
    return batches, time.perf_counter() - started


async def create_topic(
    cluster: Cluster, partitions: int, replication_factor: int = 1
) -> list[TopicPartition]:
    await Admin(cluster).create_topic(TOPIC, partitions, replication_factor)
    return [TopicPartition(TOPIC, p) for p in range(partitions)]


async def send_all(
    producer: Producer, batches: Sequence[bytes], partitions: int, in_flight: int
) -> list[float]:
    """Send every batch, ``in_flight`` at a time; return each request's latency in seconds."""
    latencies: list[float] = []
    jobs = iter(enumerate(batches))

    async def sender() -> None:
        for index, batch in jobs:
            sent = time.perf_counter()
            await producer.send_batch(TOPIC, index % partitions, batch)
            latencies.append(time.perf_counter() - sent)

    await asyncio.gather(*(sender() for _ in range(min(in_flight, len(batches)))))
    return latencies


def distinct_values(values: pa.Buffer, record_bytes: int) -> list[bytes]:
    """Up to DISTINCT_VALUES different values, cycled through by the per-record sends.

    An application has its values in hand when it calls `send`; building them is not the
    producer's cost, and five million distinct ones would take gigabytes of memory.
    """
    count = min(DISTINCT_VALUES, len(values) // record_bytes)
    view = memoryview(values)
    return [bytes(view[n * record_bytes : (n + 1) * record_bytes]) for n in range(count)]


class LatencySample:
    """Per-record latencies of every `every`-th record, from its due time to its ack."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.latencies: list[float] = []
        self.failures: list[BaseException] = []

    def callback(self, due: float) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def delivered(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            if error is not None:
                self.failures.append(error)
            else:
                self.latencies.append(time.perf_counter() - due)

        return delivered


async def send_each_record(
    producer: Producer, values: list[bytes], records: int, sample: LatencySample
) -> None:
    """Send every record with ``Producer.send`` as fast as it takes them."""
    send = producer.send
    every = sample.every
    cycle = len(values)
    for n in range(records):
        value = values[n % cycle]
        if n % every:
            await send(TOPIC, value)
        else:
            await send(TOPIC, value, on_delivery=sample.callback(time.perf_counter()))
        if n % YIELD_EVERY == 0:
            await asyncio.sleep(0)  # an application does other things too
    await producer.flush()


def sync_warm_up(producer: SyncProducer, partitions: int) -> None:
    for partition in range(partitions):
        producer.send_future(TOPIC, b"warm-up", partition=partition).result(STORED_TIMEOUT_S)


def send_each_record_sync(
    producer: SyncProducer, values: list[bytes], records: int, sample: LatencySample
) -> None:
    """`send_each_record` through a SyncProducer, from this (non-asyncio) thread."""
    send = producer.send
    every = sample.every
    cycle = len(values)
    for n in range(records):
        value = values[n % cycle]
        if n % every:
            send(TOPIC, value)
        else:
            send(TOPIC, value, on_delivery=sample.callback(time.perf_counter()))
    producer.flush()


async def send_at_rate(
    producer: Producer, values: list[bytes], records: int, rate: float, sample: LatencySample
) -> None:
    """Offer ``rate`` records/s: each tick sends the records due by then.

    Latency counts from when a record was due, not from when it was sent, so a producer
    that falls behind shows it in its latency (no coordinated omission).
    """
    send = producer.send
    every = sample.every
    cycle = len(values)
    started = time.perf_counter()
    n = 0
    while n < records:
        due_now = min(records, int((time.perf_counter() - started) * rate) + 1)
        while n < due_now:
            value = values[n % cycle]
            if n % every:
                await send(TOPIC, value)
            else:
                due = started + n / rate
                await send(TOPIC, value, on_delivery=sample.callback(due))
            n += 1
        await asyncio.sleep(RATE_TICK_S)
    await producer.flush()


async def stall(
    producer: Producer, values: list[bytes], brokers: list[int], seconds_before: float
) -> dict[str, object]:
    """Send flat out; stop the brokers (SIGSTOP) after ``seconds_before``; send until refused.

    Returns the buffer's peak, the RSS growth from just before the stop to the most seen
    while blocked, and how long the last send waited before its BufferExhaustedError. The
    brokers are continued (SIGCONT) before this returns, and the records taken are then
    delivered.
    """
    cycle = len(values)
    started = time.perf_counter()
    n = 0
    while time.perf_counter() - started < seconds_before:
        await producer.send(TOPIC, values[n % cycle])
        n += 1
        if n % YIELD_EVERY == 0:
            await asyncio.sleep(0)
    rss_before = rss_bytes()
    rss_peak = rss_before
    for pid in brokers:
        os.kill(pid, signal.SIGSTOP)
    try:
        while True:
            waited = time.perf_counter()
            try:
                await producer.send(TOPIC, values[n % cycle])
            except BufferExhaustedError:
                blocked_s = time.perf_counter() - waited
                break
            n += 1
            if n % YIELD_EVERY == 0:
                rss_peak = max(rss_peak, rss_bytes())
                await asyncio.sleep(0)
        rss_peak = max(rss_peak, rss_bytes())
    finally:
        for pid in brokers:
            os.kill(pid, signal.SIGCONT)
    await producer.flush()
    return {
        "stall_records_taken": n,
        "buffer_memory": producer.config.buffer_memory,
        "peak_buffered_bytes": producer.pool.peak_bytes,
        "rss_growth_bytes": rss_peak - rss_before,
        "blocked_ms": round(blocked_s * 1000),
    }


async def warm_up(producer: Producer, partitions: int) -> None:
    """One acknowledged record per partition: producer id, connections and leaders settled."""
    for partition in range(partitions):
        await producer.send_records(TOPIC, [b"warm-up"], partition=partition)


def rss_bytes() -> int:
    """This process's resident set size now, from /proc/self/status."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def wait_until_stored(
    cluster: Cluster, partitions: list[TopicPartition], records: int
) -> None:
    """Poll the partitions' high watermarks until they add up to ``records``."""
    consumer = Consumer(cluster)
    deadline = time.perf_counter() + STORED_TIMEOUT_S
    while True:
        offsets = await consumer.list_offsets(partitions, LATEST_TIMESTAMP)
        stored = sum(offset for offset, _ in offsets.values())
        if stored > records:
            raise RuntimeError(f"the broker stores {stored} records, {records} were sent")
        if stored == records:
            return
        if time.perf_counter() > deadline:
            raise TimeoutError(f"only {stored} of {records} records stored after the sends")
        await asyncio.sleep(0.001)


def producer_config(args: argparse.Namespace) -> ProducerConfig:
    return ProducerConfig(
        acks=parse_acks(args.acks),
        enable_idempotence=args.idempotent,
        batch_records=args.batch_records,
        linger_ms=args.linger_ms,
        compression=args.compression,
        max_in_flight_per_partition=args.max_in_flight,
        buffer_memory=args.buffer_memory,
        max_block_ms=args.max_block_ms,
    )


async def _run(
    bootstrap: list[tuple[str, int]],
    args: argparse.Namespace,
    batches: list[bytes],
    values: list[bytes] | None,
    security: SecurityConfig | None,
    broker_pids: list[int],
) -> tuple[float, list[float], dict[str, object]]:
    """Create the topic, then time sending the records; return (seconds, latencies, extra)."""
    cluster = Cluster(bootstrap, client_id="replog-bench-produce", security=security)
    try:
        partitions = await create_topic(cluster, args.partitions, args.rf)
        producer = Producer(cluster, producer_config(args))
        warmed = 0
        if values is not None:
            await warm_up(producer, args.partitions)
            warmed = args.partitions
        started = time.perf_counter()
        extra: dict[str, object] = {}
        records = args.records
        if values is None:
            latencies = await send_all(producer, batches, args.partitions, args.in_flight)
        elif args.api == "sync":
            sync_producer = await asyncio.to_thread(
                SyncProducer, bootstrap, producer_config(args), security=security
            )
            sample = LatencySample(args.latency_every)
            try:
                await asyncio.to_thread(sync_warm_up, sync_producer, args.partitions)
                warmed += args.partitions
                started = time.perf_counter()
                await asyncio.to_thread(
                    send_each_record_sync, sync_producer, values, records, sample
                )
            finally:
                await asyncio.to_thread(sync_producer.close)
            if sample.failures:
                raise sample.failures[0]
            latencies = sample.latencies
        elif args.stall is not None:
            extra = await stall(producer, values, broker_pids, args.stall)
            records = int(extra["stall_records_taken"])  # type: ignore[call-overload]
            latencies = []
        else:
            sample = LatencySample(args.latency_every)
            if args.rate is None:
                await send_each_record(producer, values, records, sample)
            else:
                await send_at_rate(producer, values, records, args.rate, sample)
            if sample.failures:
                raise sample.failures[0]
            latencies = sample.latencies
        await wait_until_stored(cluster, partitions, records + warmed)
        return time.perf_counter() - started, latencies, extra
    finally:
        await cluster.close()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser)
    parser.add_argument("--acks", choices=["0", "1", "all"], default="1", help="acks (1)")
    parser.add_argument("--brokers", type=positive_int, default=1, help="broker processes (1)")
    parser.add_argument("--rf", type=positive_int, default=1, help="replication factor (1)")
    parser.add_argument(
        "--idempotent",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="idempotent producer (default: exactly when --acks all)",
    )
    parser.add_argument(
        "--compression", choices=list(COMPRESSION_CODECS), default="none", help="codec (none)"
    )
    parser.add_argument(
        "--api",
        choices=["batch", "record", "sync"],
        default="batch",
        help="send pre-built batches, every record through Producer.send, or every record "
        "through SyncProducer.send from a plain thread (batch)",
    )
    parser.add_argument(
        "--linger-ms", type=int, default=5, help="producer linger, --api record only (5)"
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=None,
        help="--api record: offer this many records/s at a steady pace (as fast as taken)",
    )
    parser.add_argument(
        "--latency-every",
        type=positive_int,
        default=16,
        help="--api record: time every N-th record's delivery (16)",
    )
    parser.add_argument(
        "--stall",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="--api record: send for SECONDS, then SIGSTOP the brokers and send until "
        "refused; report the memory held",
    )
    parser.add_argument(
        "--buffer-memory",
        type=positive_int,
        default=DEFAULT_BUFFER_MEMORY,
        help=f"producer buffer_memory in bytes ({DEFAULT_BUFFER_MEMORY})",
    )
    parser.add_argument(
        "--max-block-ms",
        type=int,
        default=None,
        help="producer max_block_ms (60000; 2000 with --stall)",
    )
    parser.add_argument(
        "--security",
        choices=SECURITY_MODES,
        default=PLAINTEXT_MODE,
        help="secure the brokers so (and run plaintext first, for the ratio) (plaintext)",
    )
    parser.add_argument(
        "--client-loop",
        choices=event_loop.EVENT_LOOPS,
        default=event_loop.ASYNCIO,
        help="the event loop the producer runs on (asyncio); the brokers run on theirs "
        "(uvloop with TLS, else asyncio; REPLOG_EVENT_LOOP sets both)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=1,
        help="timed runs of each kind (alternating with --security); the median is reported (1)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=positive_int,
        default=5,
        help="producer batches in flight per partition (5; at most 5 when idempotent)",
    )
    args = parser.parse_args(argv)
    finish_arguments(parser, args)
    if args.rf > args.brokers:
        parser.error(f"--rf {args.rf} is more than --brokers {args.brokers}")
    if args.idempotent and args.acks != "all":
        parser.error("--idempotent needs --acks all")
    if args.linger_ms < 0:
        parser.error(f"--linger-ms must be 0 or more, got {args.linger_ms}")
    if (args.rate or args.stall) and args.api != "record":
        parser.error("--rate and --stall time the per-record API: add --api record")
    if args.rate and args.stall:
        parser.error("--rate and --stall are different runs: choose one")
    if args.max_block_ms is None:
        args.max_block_ms = STALL_MAX_BLOCK_MS if args.stall else ProducerConfig.max_block_ms
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    config = producer_config(args)
    limits = measure_limits(args.limits_seconds)
    batches, encode_s = build_batches(
        args.records, args.record_bytes, args.batch_records, args.compression
    )
    wire_bytes = sum(len(batch) for batch in batches)
    values = None
    if args.api in ("record", "sync"):
        distinct = min(args.records, DISTINCT_VALUES)
        values = distinct_values(random_values(distinct, args.record_bytes), args.record_bytes)
    modes = list(dict.fromkeys([PLAINTEXT_MODE, args.security]))
    runs: dict[str, list[Run]] = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        for mode in modes:
            runs[mode].append(_measure(args, batches, values, mode))
    seconds, latencies, cpu_seconds, extra = _median(runs[args.security])
    plaintext = None if args.security == PLAINTEXT_MODE else _median(runs[PLAINTEXT_MODE])
    latencies_ms = sorted(latency * 1000 for latency in latencies)
    records = int(extra.get("stall_records_taken", args.records))  # type: ignore[call-overload]
    wire_mb_per_s = wire_bytes * records / args.records / MB / seconds
    value_mb = records * args.record_bytes / MB
    emit(
        {
            "bench": "produce",
            "acks": args.acks,
            "brokers": args.brokers,
            "rf": args.rf,
            "idempotent": config.idempotent,
            "compression": args.compression,
            "api": args.api,
            "linger_ms": args.linger_ms if args.api != "batch" else None,
            "rate": args.rate,
            "max_in_flight": args.max_in_flight,
            "record_bytes": args.record_bytes,
            "records": records,
            "batch_records": args.batch_records,
            "partitions": args.partitions,
            "in_flight": args.in_flight,
            "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds),
            "security": args.security,
            "rounds": args.rounds,
            "client_loop": args.client_loop,
            "mb_per_s": round(value_mb / seconds, 1),
            "wire_mb_per_s": round(wire_mb_per_s, 1),
            "p50_ms": round(percentile(latencies_ms, 50), 2) if latencies_ms else None,
            "p99_ms": round(percentile(latencies_ms, 99), 2) if latencies_ms else None,
            "encode_records_per_s": round(args.records / encode_s),
            "loopback_mb_per_s": limits["loopback_mb_per_s"],
            "disk_append_mb_per_s": limits["disk_append_mb_per_s"],
            "ratio_to_loopback": round(wire_mb_per_s / limits["loopback_mb_per_s"], 3),
            "cpu_ms_per_mb": round(cpu_seconds * 1000 / value_mb, 2),
            "plaintext_mb_per_s": None if plaintext is None else round(value_mb / plaintext[0], 1),
            "ratio_to_plaintext": None if plaintext is None else round(plaintext[0] / seconds, 3),
            "plaintext_cpu_ms_per_mb": None
            if plaintext is None
            else round(plaintext[2] * 1000 / value_mb, 2),
            "cpu_ratio_to_plaintext": None
            if plaintext is None
            else round(plaintext[2] / cpu_seconds, 3),
            **extra,
        }
    )


# seconds, request (or sampled record) latencies, CPU seconds, --stall figures
Run = tuple[float, list[float], float, dict[str, object]]


def _median(runs: list[Run]) -> Run:
    """The run of median duration (each run's figures stay together)."""
    return sorted(runs, key=lambda run: run[0])[len(runs) // 2]


def _measure(
    args: argparse.Namespace, batches: list[bytes], values: list[bytes] | None, security: str
) -> Run:
    """One timed run on a fresh cluster of ``args.brokers`` brokers secured as ``security``."""
    with local_cluster(args.brokers, security=security) as cluster:
        pids = [b.pid for b in cluster.brokers if b.pid is not None]
        cpu_before = _cpu_seconds(pids)
        seconds, latencies, extra = event_loop.run(
            asyncio.wait_for(
                _run(cluster.bootstrap, args, batches, values, cluster.security, pids),
                RUN_TIMEOUT_S,
            ),
            args.client_loop,
        )
        return seconds, latencies, _cpu_seconds(pids) - cpu_before, extra


def _cpu_seconds(broker_pids: list[int]) -> float:
    """CPU seconds used so far by the brokers and this process (the client)."""
    return time.process_time() + sum(sum(process_cpu_seconds(pid)) for pid in broker_pids)


if __name__ == "__main__":
    main()
