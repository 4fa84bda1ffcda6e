"""librdkafka parses what the tables encode: a small asyncio server answers ApiVersions
(from SERVED) and Metadata with the engine, and a real confluent-kafka AdminClient lists
the topics it describes. No broker: only the codec is under test."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka.admin import AdminClient

from spark_replica.kafka_wire.headers import decode_request, encode_response
from spark_replica.kafka_wire.schema import Data
from spark_replica.kafka_wire.versions import SERVED

API_VERSIONS = 18
METADATA = 3
TOPIC = "orders"
PARTITIONS = 3


@dataclass
class TableServer:
    """Answers ApiVersions and Metadata on a free port from a thread of its own."""

    requests: list[tuple[int, int]] = field(default_factory=list)
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
                header, _ = decode_request(await reader.readexactly(size))
                self.requests.append((header.api_key, header.api_version))
                body = self._answer(header.api_key)
                writer.writelines(
                    encode_response(header.api_key, header.api_version, header.correlation_id, body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _answer(self, api_key: int) -> Data:
        if api_key == API_VERSIONS:
            keys = [
                Data(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(SERVED.items())
            ]
            return Data(error_code=0, api_keys=keys)
        assert api_key == METADATA
        partitions = [
            Data(
                partition_index=index, leader_id=1, leader_epoch=3, replica_nodes=[1], isr_nodes=[1]
            )
            for index in range(PARTITIONS)
        ]
        return Data(
            brokers=[Data(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id="replog",
            controller_id=1,
            topics=[Data(name=TOPIC, partitions=partitions)],
        )


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
