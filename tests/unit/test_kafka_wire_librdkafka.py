"""librdkafka parses what the tables encode: a small asyncio server answers ApiVersions
(from SERVED), Metadata, InitProducerId, Produce, Fetch, ListOffsets and
OffsetForLeaderEpoch with the engine, and real confluent-kafka clients list topics,
produce idempotently and read back what they produced. No broker: only the codec is
under test. Requests the server does not model go unanswered (librdkafka pipelines, so
a consumer's FindCoordinator waiting does not hold up its fetches)."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_replica.wire.kafka.headers import decode_request, encode_response
from spark_replica.wire.kafka.versions import SERVED
from spark_replica.wire.schema import Data

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
API_VERSIONS = 18
LEADER_EPOCH = 3
PRODUCER_ID = 4000
TOPIC = "orders"
PARTITIONS = 3


@dataclass
class TableServer:
    """Answers ApiVersions and Metadata on a free port from a thread of its own."""

    requests: list[tuple[int, int]] = field(default_factory=list)
    # The record batches produced to each partition, as the producer sent them.
    logs: dict[int, list[bytes]] = field(default_factory=dict)
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _started: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()
        assert self._started.wait(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()
        server.close()
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, request = decode_request(await reader.readexactly(size))
                self.requests.append((header.api_key, header.api_version))
                answer = self._ANSWERS.get(header.api_key)
                if answer is None:
                    continue
                body = answer(self, request)
                writer.writelines(
                    encode_response(header.api_key, header.api_version, header.correlation_id, body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _api_versions(self, request: Data) -> Data:
        keys = [
            Data(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(SERVED.items())
        ]
        return Data(error_code=0, api_keys=keys)

    def _metadata(self, request: Data) -> Data:
        partitions = [
            Data(
                partition_index=index,
                leader_id=1,
                leader_epoch=LEADER_EPOCH,
                replica_nodes=[1],
                isr_nodes=[1],
            )
            for index in range(PARTITIONS)
        ]
        return Data(
            brokers=[Data(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id="replog",
            controller_id=1,
            topics=[Data(name=TOPIC, partitions=partitions)],
        )

    def _init_producer_id(self, request: Data) -> Data:
        assert request.transactional_id is None
        return Data(error_code=0, producer_id=PRODUCER_ID, producer_epoch=0)

    def _end(self, partition: int) -> int:
        return len(self.logs.get(partition, []))

    def _produce(self, request: Data) -> Data:
        """One record per batch in this test, so a batch's index is its offset."""
        responses = []
        for topic in request.topic_data:
            results = []
            for partition in topic.partition_data:
                log = self.logs.setdefault(partition.index, [])
                results.append(
                    Data(index=partition.index, base_offset=len(log), log_start_offset=0)
                )
                # A broker stamps the base offset (outside the batch's CRC).
                log.append(struct.pack(">q", len(log)) + bytes(partition.records)[8:])
            responses.append(Data(name=topic.name, partition_responses=results))
        return Data(responses=responses)

    def _fetch(self, request: Data) -> Data:
        responses = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                end = self._end(partition.partition)
                records = self.logs.get(partition.partition, [])[partition.fetch_offset :]
                partitions.append(
                    Data(
                        partition_index=partition.partition,
                        high_watermark=end,
                        last_stable_offset=end,
                        log_start_offset=0,
                        records=records,
                    )
                )
            responses.append(Data(topic=topic.topic, partitions=partitions))
        return Data(responses=responses)

    def _list_offsets(self, request: Data) -> Data:
        topics = [
            Data(
                name=topic.name,
                partitions=[
                    Data(
                        partition_index=p.partition_index,
                        offset=0 if p.timestamp == -2 else self._end(p.partition_index),
                        leader_epoch=LEADER_EPOCH,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
        return Data(topics=topics)

    def _offset_for_leader_epoch(self, request: Data) -> Data:
        topics = [
            Data(
                topic=topic.topic,
                partitions=[
                    Data(
                        partition=p.partition,
                        leader_epoch=LEADER_EPOCH,
                        end_offset=self._end(p.partition),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
        return Data(topics=topics)

    _ANSWERS: ClassVar[dict[int, Callable[[TableServer, Data], Data]]] = {
        API_VERSIONS: _api_versions,
        METADATA: _metadata,
        INIT_PRODUCER_ID: _init_producer_id,
        PRODUCE: _produce,
        FETCH: _fetch,
        LIST_OFFSETS: _list_offsets,
        OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    }


@pytest.fixture
def table_server() -> Iterator[TableServer]:
    server = TableServer()
    server.start()
    yield server
    server.stop()


def test_librdkafka_reads_api_versions_and_metadata(table_server: TableServer) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{table_server.port}", "log_level": 3})
    metadata = admin.list_topics(timeout=20)
    assert metadata.cluster_id == "replog"
    assert metadata.controller_id == 1
    assert set(metadata.brokers) == {1}
    assert sorted(metadata.topics[TOPIC].partitions) == list(range(PARTITIONS))
    assert metadata.topics[TOPIC].partitions[2].isrs == [1]
    assert (API_VERSIONS, 3) in table_server.requests
    assert (METADATA, SERVED[METADATA][1]) in table_server.requests


def test_librdkafka_produces_idempotently_and_reads_back(table_server: TableServer) -> None:
    bootstrap = f"127.0.0.1:{table_server.port}"
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    delivered: list[tuple[int, int]] = []

    def on_delivery(error: object, message: object) -> None:
        assert error is None, error
        delivered.append((message.partition(), message.offset()))  # type: ignore[attr-defined]

    for index in range(3):
        producer.produce(
            TOPIC,
            key=b"k%d" % index,
            value=b"v%d" % index,
            partition=1,
            headers=[("h", b"x")],
            on_delivery=on_delivery,
        )
        assert producer.flush(20) == 0
    assert delivered == [(1, 0), (1, 1), (1, 2)]
    assert (INIT_PRODUCER_ID, SERVED[INIT_PRODUCER_ID][1]) in table_server.requests
    assert (PRODUCE, SERVED[PRODUCE][1]) in table_server.requests

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 1, 0)])
        received = []
        deadline = time.monotonic() + 20
        while len(received) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                received.append(
                    (message.offset(), message.key(), message.value(), message.headers())
                )
    finally:
        consumer.close()
    assert received == [(i, b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(3)]
    assert (FETCH, SERVED[FETCH][1]) in table_server.requests


def test_aiokafka_produces_and_reads_back(table_server: TableServer) -> None:
    bootstrap = f"127.0.0.1:{table_server.port}"

    async def round_trip() -> list[tuple[int, bytes | None, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for index in range(2):
                await producer.send_and_wait(TOPIC, b"v%d" % index, key=b"k%d" % index, partition=2)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = AioTopicPartition(TOPIC, 2)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            batches = await consumer.getmany(partition, timeout_ms=10_000, max_records=2)
            return [(m.offset, m.key, m.value) for m in batches.get(partition, [])]
        finally:
            await consumer.stop()

    received = asyncio.run(asyncio.wait_for(round_trip(), 30))
    assert received == [(0, b"k0", b"v0"), (1, b"k1", b"v1")]
