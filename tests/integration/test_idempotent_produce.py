"""Idempotent produce through real brokers: producer ids, duplicates, gaps, fencing, restart."""

from __future__ import annotations

import asyncio

import pytest

from spark_replica.client import BrokerConnection, Cluster, Consumer, Producer, ProducerConfig
from spark_replica.errors import (
    CoordinatorNotAvailableError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    InvalidRequestError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
    error_for_code,
)
from spark_replica.records import build_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from spark_replica.wire.native.list_offsets import EARLIEST_TIMESTAMP
from spark_replica.wire.native.produce import (
    ACKS_ALL,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceTopic,
)
from tests.support import BrokerFactory, create_topic, run

pytestmark = pytest.mark.slow

TIMEOUT_S = 30.0
TOPIC = "idempotent"
ATTEMPTS = 50


async def init_producer_id(
    broker: BrokerProcess, producer_id: int = -1, producer_epoch: int = -1
) -> InitProducerIdResponse:
    conn = BrokerConnection(broker.host, broker.port)
    await conn.connect()
    try:
        request = InitProducerIdRequest(producer_id=producer_id, producer_epoch=producer_epoch)
        return await conn.send(request, timeout_s=TIMEOUT_S)
    finally:
        await conn.close()


async def send_batch(
    broker: BrokerProcess,
    value: str,
    producer_id: int,
    epoch: int,
    sequence: int,
    topic: str = TOPIC,
) -> ProducePartitionResult:
    """Produce a two-record batch with these producer fields; the partition's answer."""
    batch = build_batch(
        [value, value + "!"],
        timestamps=[1, 2],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    request = ProduceRequest(ACKS_ALL, 10_000, [ProduceTopic(topic, [ProducePartition(0, batch)])])
    conn = BrokerConnection(broker.host, broker.port)
    await conn.connect()
    try:
        # Retriable errors (leadership not yet settled after a start) are retried, as a
        # producer would: the same batch again, which is exactly what idempotence allows.
        for _ in range(ATTEMPTS):
            response = await conn.send(request, timeout_s=TIMEOUT_S)
            result: ProducePartitionResult = response.topics[0].partitions[0]
            if not (result.error_code and error_for_code(result.error_code).retriable):
                return result
            await asyncio.sleep(0.2)
        return result
    finally:
        await conn.close()


def test_producer_ids_never_repeat_across_brokers(brokers: BrokerFactory) -> None:
    one, two = brokers.start(1), brokers.start(2)

    async def scenario() -> list[int]:
        return [(await init_producer_id(b)).producer_id for b in (one, two, one, two)]

    ids = run(scenario())
    assert len(set(ids)) == 4
    assert ids[2] == ids[0] + 1, "a broker hands out its block in order"
    assert abs(ids[1] - ids[0]) >= 1000, "each broker claims its own block of 1000"


def test_init_producer_id_bumps_the_epoch_and_leaves_transactional_ids_to_the_coordinator(
    broker: BrokerProcess,
) -> None:
    async def scenario() -> None:
        fresh = await init_producer_id(broker)
        assert fresh.producer_epoch == 0
        bumped = await init_producer_id(broker, fresh.producer_id, 0)
        assert (bumped.producer_id, bumped.producer_epoch) == (fresh.producer_id, 1)
        with pytest.raises(InvalidRequestError):
            await init_producer_id(broker, fresh.producer_id, -1)
        conn = BrokerConnection(broker.host, broker.port)
        await conn.connect()
        try:
            # No allocation from the idempotent producers' path: the id's transaction
            # coordinator answers, and its internal topic does not exist yet.
            with pytest.raises(CoordinatorNotAvailableError):
                await conn.send(InitProducerIdRequest("txn"), timeout_s=TIMEOUT_S)
        finally:
            await conn.close()

    run(scenario())


def test_duplicates_gaps_and_old_epochs(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        await create_topic([(broker.host, broker.port)], TOPIC)
        pid = (await init_producer_id(broker)).producer_id
        first = await send_batch(broker, "a", pid, 0, 0)
        assert (first.error_code, first.base_offset) == (0, 0)
        retry = await send_batch(broker, "a", pid, 0, 0)
        assert (retry.error_code, retry.base_offset) == (0, 0)
        second = await send_batch(broker, "b", pid, 0, 2)
        assert (second.error_code, second.base_offset) == (0, 2), "the retry appended nothing"

        gap = await send_batch(broker, "c", pid, 0, 9)
        assert gap.error_code == OutOfOrderSequenceError.code
        assert "expected sequence 4" in (gap.error_message or "")

        bumped = await init_producer_id(broker, pid, 0)
        assert (await send_batch(broker, "d", pid, bumped.producer_epoch, 0)).base_offset == 4
        stale = await send_batch(broker, "e", pid, 0, 4)
        assert stale.error_code == InvalidProducerEpochError.code
        plain = await send_batch(broker, "f", -1, -1, -1)
        assert (plain.error_code, plain.base_offset) == (0, 6)

    run(scenario())


def test_duplicate_is_recognised_after_a_restart(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)

    async def before() -> int:
        await create_topic([(broker.host, broker.port)], TOPIC)
        pid = (await init_producer_id(broker)).producer_id
        for n in range(3):
            result = await send_batch(broker, f"v{n}", pid, 0, 2 * n)
            assert (result.error_code, result.base_offset) == (0, 2 * n)
        return pid

    pid = run(before())
    assert broker.stop() == 0
    broker = brokers.start(1)

    async def after() -> None:
        retry = await send_batch(broker, "v2", pid, 0, 4)
        assert (retry.error_code, retry.base_offset) == (0, 4)
        following = await send_batch(broker, "v3", pid, 0, 6)
        assert (following.error_code, following.base_offset) == (0, 6)
        fresh = (await init_producer_id(broker)).producer_id
        assert fresh > pid, "a restarted broker claims a new block, never reusing ids"

    run(after())


def test_a_producer_stays_known_after_retention_and_a_restart(brokers: BrokerFactory) -> None:
    """Its batches are all deleted, yet a retry is a duplicate, not UNKNOWN_PRODUCER_ID.

    The id is in the range the Spark sink derives from a query id (2**62 and up).
    """
    broker = brokers.start(1, **{"log.retention.check.interval.ms": "100"})
    pid = 2**62 + 17
    topic = "retained"
    tp = TopicPartition(topic, 0)

    async def earliest_offset() -> int:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            return (await Consumer(cluster).list_offsets([tp], EARLIEST_TIMESTAMP))[tp][0]
        finally:
            await cluster.close()

    async def before() -> None:
        bootstrap = [(broker.host, broker.port)]
        await create_topic(bootstrap, topic, **{"segment.bytes": "2048", "retention.bytes": "1"})
        for n in range(6):
            result = await send_batch(broker, f"p{n}", pid, 0, 2 * n, topic=topic)
            assert (result.error_code, result.base_offset) == (0, 2 * n)
        cluster = Cluster(bootstrap)
        try:
            plain = Producer(cluster, ProducerConfig(acks=-1, enable_idempotence=False))
            for n in range(40):  # other writers fill segments; retention deletes the old ones
                await plain.send_records(topic, [f"plain-{n}"], partition=0)
        finally:
            await cluster.close()
        for _ in range(100):
            if await earliest_offset() > 12:
                return
            await asyncio.sleep(0.1)
        raise AssertionError("retention did not delete the producer's segments")

    run(before())
    assert broker.stop() == 0
    broker = brokers.start(1)

    async def after() -> None:
        assert await earliest_offset() > 12, "the producer's batches are gone from the log"
        retry = await send_batch(broker, "p5", pid, 0, 10, topic=topic)
        assert (retry.error_code, retry.base_offset) == (0, 10), retry.error_message
        old = await send_batch(broker, "p0", pid, 0, 0, topic=topic)
        assert old.error_code == DuplicateSequenceNumberError.code, old.error_message
        following = await send_batch(broker, "p6", pid, 0, 12, topic=topic)
        assert following.error_code == 0 and following.base_offset > 12

    run(after())


class AnswerDroppingProxy:
    """A TCP relay to a broker that cuts the connection instead of relaying one answer.

    The broker has appended the batch by the time it answers, so the producer sees the
    connection die after the append: the case where a retry must not append twice.
    """

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.answers_to_drop = 1
        self.dropped = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.broker.host, self.broker.port)

        async def requests() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        async def answers() -> None:
            while data := await up_reader.read(65536):
                if self.answers_to_drop:
                    self.answers_to_drop -= 1
                    self.dropped += 1
                    return
                writer.write(data)
                await writer.drain()

        pumps = [asyncio.create_task(requests()), asyncio.create_task(answers())]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        for w in (writer, up_writer):
            w.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class ProduceThroughProxy(Cluster):
    """Metadata and everything else go to the broker; produce requests go through a proxy."""

    def __init__(self, bootstrap: list[tuple[str, int]], proxy_port: int) -> None:
        super().__init__(bootstrap)
        self.proxy_port = proxy_port

    async def connection(self, broker_id: int, purpose: str = "default") -> BrokerConnection:
        if purpose != "produce":
            return await super().connection(broker_id, purpose)
        return await self._connect((broker_id, "proxied"), "127.0.0.1", self.proxy_port)


def test_an_answer_lost_after_the_append_is_retried_without_a_second_append(
    broker: BrokerProcess,
) -> None:
    bootstrap = [(broker.host, broker.port)]
    run(create_topic(bootstrap, "cut"))

    async def scenario() -> list[int]:
        proxy = AnswerDroppingProxy(broker)
        cluster = ProduceThroughProxy(bootstrap, await proxy.start())
        try:
            producer = Producer(cluster, ProducerConfig(acks=ACKS_ALL, retry_backoff_ms=50))
            sent = await producer.send_records("cut", ["a", "b", "c"], partition=0)
            assert proxy.dropped == 1, "the first answer was cut off"
            return [m.offset for m in sent]
        finally:
            await cluster.close()
            await proxy.close()

    assert run(scenario()) == [0, 1, 2], "the retry was answered with the original offsets"

    async def stored() -> list[bytes]:
        cluster = Cluster(bootstrap)
        try:
            consumer = Consumer(cluster)
            tp = TopicPartition("cut", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            values: list[bytes] = []
            for _ in range(20):
                for chunk in await consumer.poll(max_wait_ms=100):
                    values.extend(chunk.records.column("value").to_pylist())
            return values
        finally:
            await cluster.close()

    assert run(stored()) == [b"a", b"b", b"c"], "the log holds the batch once"


def test_an_idle_producer_is_forgotten_after_producer_id_expiration(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(
        1,
        **{
            "producer.id.expiration.ms": "1500",
            "producer.id.expiration.check.interval.ms": "200",
        },
    )

    async def scenario() -> None:
        await create_topic([(broker.host, broker.port)], TOPIC)
        busy = (await init_producer_id(broker)).producer_id
        idle = (await init_producer_id(broker)).producer_id
        assert (await send_batch(broker, "i0", idle, 0, 0)).error_code == 0
        for n in range(8):  # keeps writing, 0.4 s apart: never idle for 1.5 s
            assert (await send_batch(broker, f"b{n}", busy, 0, 2 * n)).error_code == 0
            await asyncio.sleep(0.4)
        forgotten = await send_batch(broker, "i1", idle, 0, 2)
        assert forgotten.error_code == UnknownProducerIdError.code
        assert (await send_batch(broker, "b8", busy, 0, 16)).error_code == 0

    run(scenario())
    log = (broker.log_dir / "broker.log").read_text()
    assert "producer ids idle for 1500 ms" in log
