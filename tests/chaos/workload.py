"""The load of a chaos schedule: idempotent acks=all producers and a consumer reading
all along, each remembering what it was told, plus the final full read.

Producers send keyed records whose values are unique in the schedule (`p<n>-<seq>`), a
few keys per producer, at a bounded rate with a bounded number unanswered; every send is
remembered in send order with its outcome. The producer settings are explicit (acks=all,
idempotence on), not the library's defaults, which may change.

The consumer reads every partition from the start through the client's Consumer (so
only below the high watermark) and remembers each record at its offset. Each poll has a
deadline: a paused leader answers nothing, and after a timeout the consumer refreshes
metadata to find the new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from spark_replica.client import (
    Admin,
    Cluster,
    Consumer,
    ConsumerConfig,
    FetchedRecords,
    Producer,
    ProducerConfig,
    RecordMetadata,
)
from spark_replica.errors import OffsetOutOfRangeError, ReplogError
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from spark_replica.wire.native.produce import ACKS_ALL
from tests.chaos.checker import Send, Stored

PRODUCER_CONFIG = ProducerConfig(
    acks=ACKS_ALL,
    enable_idempotence=True,
    max_in_flight_per_partition=5,
    request_timeout_ms=3_000,
    delivery_timeout_ms=10_000,
    retry_backoff_ms=100,
    linger_ms=5,
)
KEYS_PER_PRODUCER = 8
BURST_RECORDS = 5
BURST_INTERVAL_S = 0.02
MAX_UNANSWERED = 300
POLL_WAIT_MS = 200
POLL_TIMEOUT_S = 3.0
RETRY_PAUSE_S = 0.1


@dataclass(slots=True)
class _Entry:
    key: bytes
    value: bytes
    metadata: RecordMetadata | None = None
    error: str | None = None

    def as_send(self) -> Send:
        if self.metadata is None:
            return Send(self.key, self.value)
        return Send(self.key, self.value, self.metadata.partition, self.metadata.offset)


@dataclass
class ProducerLoad:
    index: int
    seed: int
    entries: list[_Entry] = field(default_factory=list)
    unanswered: int = 0

    def sends(self) -> list[Send]:
        return [entry.as_send() for entry in self.entries]

    def errors(self) -> Counter[str]:
        return Counter(entry.error for entry in self.entries if entry.error is not None)

    async def run(
        self, bootstrap: list[tuple[str, int]], topic: str, stop: asyncio.Event, drain_s: float
    ) -> None:
        """Send until `stop` is set, then wait up to `drain_s` for the answers."""
        rng = random.Random(self.seed)
        cluster = Cluster(bootstrap, client_id=f"chaos-producer-{self.index}")
        producer = Producer(cluster, PRODUCER_CONFIG)
        try:
            while not stop.is_set():
                if self.unanswered < MAX_UNANSWERED:
                    for _ in range(BURST_RECORDS):
                        await self._send(producer, topic, rng)
                await asyncio.sleep(BURST_INTERVAL_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(producer.flush(), drain_s)
        finally:
            await cluster.close()

    async def _send(self, producer: Producer, topic: str, rng: random.Random) -> None:
        key = f"p{self.index}-k{rng.randrange(KEYS_PER_PRODUCER)}".encode()
        entry = _Entry(key, f"p{self.index}-{len(self.entries)}".encode())
        self.entries.append(entry)
        self.unanswered += 1

        def delivered(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            self.unanswered -= 1
            if error is None:
                entry.metadata = metadata
            else:
                entry.error = type(error).__name__

        try:
            await producer.send(topic, entry.value, entry.key, on_delivery=delivered)
        except ReplogError as exc:  # not taken (no metadata, no room): as good as failed
            delivered(None, exc)


@dataclass
class ConsumerLoad:
    observed: list[Stored] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    async def run(self, bootstrap: list[tuple[str, int]], topic: str, stop: asyncio.Event) -> None:
        cluster = Cluster(bootstrap, client_id="chaos-consumer")
        consumer = Consumer(cluster, ConsumerConfig(max_wait_ms=POLL_WAIT_MS))
        try:
            await consumer.assign_topic(topic)
            while not stop.is_set():
                for chunk in await self._poll(consumer):
                    self.observed.extend(_rows(chunk))
        finally:
            await cluster.close()

    async def _poll(self, consumer: Consumer) -> list[FetchedRecords]:
        try:
            return await asyncio.wait_for(consumer.poll(POLL_WAIT_MS), POLL_TIMEOUT_S)
        except (ReplogError, TimeoutError) as exc:
            self.errors[type(exc).__name__] += 1
            if isinstance(exc, OffsetOutOfRangeError | TimeoutError):
                with contextlib.suppress(ReplogError, TimeoutError):
                    await asyncio.wait_for(consumer.cluster.refresh(), POLL_TIMEOUT_S)
            await asyncio.sleep(RETRY_PAUSE_S)
            return []


def _rows(chunk: FetchedRecords) -> list[Stored]:
    keys = chunk.records.column("key").to_pylist()
    values = chunk.records.column("value").to_pylist()
    partition = chunk.tp.partition
    return [
        Stored(partition, chunk.first_offset + n, key, value)
        for n, (key, value) in enumerate(zip(keys, values, strict=True))
    ]


async def create_topic(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int, replicas: int
) -> None:
    cluster = Cluster(bootstrap, client_id="chaos-admin")
    try:
        await Admin(cluster).create_topic(
            topic, partitions, replicas, {"min.insync.replicas": str(replicas - 1)}
        )
    finally:
        await cluster.close()


async def wait_healthy(
    bootstrap: list[tuple[str, int]], topic: str, replicas: int, timeout_s: float
) -> bool:
    """Until every partition has a leader, a full ISR and every replica at the HW."""
    cluster = Cluster(bootstrap, client_id="chaos-admin")
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(ReplogError, TimeoutError):
                described = await asyncio.wait_for(Admin(cluster).describe([topic]), 10)
                if all(
                    _healthy(p.isr, p.high_watermark, p.log_end_offsets, replicas) and p.leader >= 0
                    for p in described[topic]
                ):
                    return True
            await asyncio.sleep(0.2)
        return False
    finally:
        await cluster.close()


def _healthy(isr: list[int], high_watermark: int, ends: dict[int, int], replicas: int) -> bool:
    return len(isr) == replicas and high_watermark >= 0 and set(ends.values()) == {high_watermark}


@dataclass(frozen=True)
class FinalRead:
    records: list[Stored]
    high_watermarks: dict[int, int]  # partition -> HW when the read began
    complete: bool


async def read_all(bootstrap: list[tuple[str, int]], topic: str, timeout_s: float) -> FinalRead:
    """Every record below each partition's HW, read from the leaders."""
    cluster = Cluster(bootstrap, client_id="chaos-final-read")
    consumer = Consumer(cluster, ConsumerConfig(max_wait_ms=POLL_WAIT_MS))
    deadline = time.monotonic() + timeout_s
    try:
        partitions = await consumer.assign_topic(topic)
        ends = {
            tp: end
            for tp, (end, _) in (await consumer.list_offsets(partitions, LATEST_TIMESTAMP)).items()
        }
        for tp in partitions:
            consumer.seek(tp, 0)
        records: list[Stored] = []
        while not (complete := all(consumer.position(tp) >= ends[tp] for tp in partitions)):
            if time.monotonic() > deadline:
                break
            with contextlib.suppress(ReplogError, TimeoutError):
                for chunk in await asyncio.wait_for(consumer.poll(POLL_WAIT_MS), POLL_TIMEOUT_S):
                    records.extend(r for r in _rows(chunk) if r.offset < ends[chunk.tp])
        return FinalRead(records, {tp.partition: end for tp, end in ends.items()}, complete)
    finally:
        await cluster.close()
