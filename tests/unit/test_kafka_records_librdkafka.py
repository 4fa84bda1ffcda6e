"""Batches as librdkafka really writes them convert and come back whole.

A small asyncio server (the wire engine's tables, no broker) answers a confluent-kafka
producer's ApiVersions, Metadata, InitProducerId and Produce, and keeps the records
field of each Produce: the bytes under test, in each codec librdkafka writes.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from confluent_kafka import Producer

from brokerd.core.batch_validation import validate_produced
from spark_replica.records import BatchHeader, set_base_offset
from spark_replica.wire.kafka.headers import decode_request, encode_response
from spark_replica.wire.kafka.records.convert import kafka_codec, kafka_to_replog, replog_to_kafka
from spark_replica.wire.kafka.versions import SERVED
from spark_replica.wire.schema import Data

PRODUCE, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 3, 18, 22
TOPIC = "captured"
PRODUCER_ID = 31
WAIT_S = 20


class CapturingServer:
    """Answers just enough for a producer, from a thread of its own; keeps what is produced."""

    def __init__(self) -> None:
        self.produced: list[bytes] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()
        assert self._started.wait(WAIT_S)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, request = decode_request(await reader.readexactly(size))
                body = self._answer(header.api_key, request)
                writer.writelines(
                    encode_response(header.api_key, header.api_version, header.correlation_id, body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _answer(self, api_key: int, request: Data) -> Data:
        if api_key == API_VERSIONS:
            keys = [
                Data(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in SERVED.items()
            ]
            return Data(error_code=0, api_keys=keys)
        if api_key == METADATA:
            partition = Data(partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])
            return Data(
                brokers=[Data(node_id=1, host="127.0.0.1", port=self.port)],
                controller_id=1,
                topics=[Data(name=TOPIC, partitions=[partition])],
            )
        if api_key == INIT_PRODUCER_ID:
            return Data(error_code=0, producer_id=PRODUCER_ID, producer_epoch=0)
        assert api_key == PRODUCE
        topic = request.topic_data[0]
        records = bytes(topic.partition_data[0].records)
        offset = sum(BatchHeader.decode(batch).record_count for batch in self.produced)
        self.produced.append(records)
        partition = Data(index=0, base_offset=offset, log_start_offset=0)
        return Data(responses=[Data(name=topic.name, partition_responses=[partition])])


@pytest.fixture
def server() -> Iterator[CapturingServer]:
    capturing = CapturingServer()
    capturing.start()
    yield capturing
    capturing.stop()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_batches_convert_and_come_back(server: CapturingServer, codec: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{server.port}",
            "enable.idempotence": True,
            "compression.codec": codec,
            "linger.ms": 50,
            "log_level": 3,
        }
    )
    sent = []
    for index in range(500):
        key = None if index % 10 == 0 else b"key-%d" % index
        value = None if index % 13 == 0 else b"value-%d " % index * (index % 7)
        headers = [("index", b"%d" % index), ("empty", None)] if index % 2 else None
        producer.produce(TOPIC, value, key, partition=0, headers=headers, timestamp=1_000 + index)
        sent.append((1_000 + index, key, value, [(k, v) for k, v in headers or []]))
    assert producer.flush(WAIT_S) == 0
    assert server.produced
    received = []
    for records in server.produced:
        assert kafka_codec(records) == codec
        stored = bytearray(kafka_to_replog(records))
        validate_produced(stored)
        set_base_offset(stored, len(received))
        fetched = DefaultRecordBatch(replog_to_kafka(stored))
        assert (fetched.producer_id, fetched.base_sequence) == (PRODUCER_ID, len(received))
        assert fetched.base_offset == len(received)
        received += [(r.timestamp, r.key, r.value, list(r.headers)) for r in fetched]
    assert received == sent
