"""Round trips through a real broker process and a real ZooKeeper.

What goes in must come out exactly: keys, values, null keys and values, headers and
timestamps, in offset order, and only below the high watermark.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest

from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.errors import UnknownTopicOrPartitionError
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tests.support import BrokerFactory, consume_all, create_topic, rows_of, run

pytestmark = pytest.mark.slow


def test_round_trip_keeps_every_field_exactly(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]
    values = [b"v0", None, b"", "v3 \u00e9", b"\x00\xff"]
    keys = [None, b"k1", b"", "k3", None]
    timestamps = [1_700_000_000_000, 1_700_000_000_005, 0, 1_700_000_000_001, 42]
    headers = [[("h", b"1"), ("h", b"2")], None, [], [("empty", None)], [("x", b"")]]

    async def produce() -> list[int]:
        cluster = Cluster(bootstrap)
        try:
            await create_topic(bootstrap, "round-trip")
            producer = Producer(cluster)
            sent = await producer.send_records(
                "round-trip", values, keys, timestamps, headers, partition=0
            )
            return [m.offset for m in sent]
        finally:
            await cluster.close()

    assert run(produce()) == [0, 1, 2, 3, 4]
    rows = rows_of(run(consume_all(bootstrap, "round-trip", 5)))
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["value"] for r in rows] == [b"v0", None, b"", "v3 \u00e9".encode(), b"\x00\xff"]
    assert [r["key"] for r in rows] == [None, b"k1", b"", b"k3", None]
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == timestamps
    assert [r["headers"] for r in rows] == [
        [{"key": "h", "value": b"1"}, {"key": "h", "value": b"2"}],
        None,
        [],
        [{"key": "empty", "value": None}],
        [{"key": "x", "value": b""}],
    ]


def test_many_batches_across_partitions_arrive_in_order(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]
    count = 30_000

    async def produce() -> None:
        await create_topic(bootstrap, "spread", partitions=3)
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(acks=-1, batch_records=1000))
            keys = [f"key-{i % 101}" for i in range(count)]
            values = [f"{i}" for i in range(count)]
            await producer.send_records("spread", values, keys)
        finally:
            await cluster.close()

    run(produce())
    rows = rows_of(run(consume_all(bootstrap, "spread", count)))
    assert len(rows) == count
    by_partition: dict[int, list[int]] = {}
    for row in rows:
        by_partition.setdefault(row["partition"], []).append(int(row["value"]))
        assert row["offset"] == len(by_partition[row["partition"]]) - 1
    for numbers in by_partition.values():
        assert numbers == sorted(numbers), "records of one partition keep their send order"
    assert sorted(n for ns in by_partition.values() for n in ns) == list(range(count))
    # The same key always lands on the same partition.
    key_homes: dict[bytes, set[int]] = {}
    for row in rows:
        key_homes.setdefault(row["key"], set()).add(row["partition"])
    assert all(len(homes) == 1 for homes in key_homes.values())


def test_list_offsets_earliest_latest_and_by_timestamp(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]
    tp = TopicPartition("timed", 0)

    async def scenario() -> dict[str, object]:
        await create_topic(bootstrap, "timed")
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(batch_records=2))
            # Timestamps are not monotonic: the first record at or after T wins.
            stamps = [1000, 3000, 2000, 5000, 4000, 6000]
            await producer.send_records("timed", [str(s) for s in stamps], timestamps=stamps)
            consumer = Consumer(cluster)
            consumer.assign([tp])
            results: dict[str, object] = {}
            for name, ts in [
                ("earliest", EARLIEST_TIMESTAMP),
                ("latest", LATEST_TIMESTAMP),
                ("t0", 0),
                ("t2500", 2500),
                ("t4500", 4500),
                ("t6000", 6000),
                ("t6001", 6001),
            ]:
                results[name] = (await consumer.list_offsets([tp], ts))[tp]
            return results
        finally:
            await cluster.close()

    found = run(scenario())
    assert found["earliest"][0] == 0
    assert found["latest"][0] == 6
    assert found["t0"] == (0, 1000)
    assert found["t2500"] == (1, 3000)
    assert found["t4500"] == (3, 5000)
    assert found["t6000"] == (5, 6000)
    assert found["t6001"] == (-1, -1)


def test_arrow_batches_round_trip(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]
    table = pa.table(
        {
            "key": pa.array([f"k{i}".encode() for i in range(5000)], pa.binary()),
            "value": pa.array([bytes([i % 256]) * 100 for i in range(5000)], pa.binary()),
        }
    )

    async def produce() -> int:
        await create_topic(bootstrap, "arrow")
        cluster = Cluster(bootstrap)
        try:
            return await Producer(cluster, ProducerConfig(batch_records=700)).send_arrow(
                "arrow", 0, table
            )
        finally:
            await cluster.close()

    assert run(produce()) == 0
    fetched = run(consume_all(bootstrap, "arrow", 5000))
    got = pa.Table.from_batches([f.records for f in fetched])
    assert got.column("key").to_pylist() == table.column("key").to_pylist()
    assert got.column("value").to_pylist() == table.column("value").to_pylist()


def test_seek_into_the_middle_of_a_batch_skips_earlier_records(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]
    tp = TopicPartition("middle", 0)

    async def scenario() -> list[bytes]:
        await create_topic(bootstrap, "middle")
        cluster = Cluster(bootstrap)
        try:
            await Producer(cluster).send_records("middle", [f"{i}" for i in range(10)])
            consumer = Consumer(cluster)
            consumer.assign([tp])
            consumer.seek(tp, 7)
            fetched = await consumer.poll(max_wait_ms=100)
            assert fetched[0].first_offset == 7
            return [v for f in fetched for v in f.records.column("value").to_pylist()]
        finally:
            await cluster.close()

    assert run(scenario()) == [b"7", b"8", b"9"]


def test_unknown_topic_is_a_typed_error(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            await Producer(cluster).send_records("nope", ["x"])
        finally:
            await cluster.close()

    with pytest.raises(UnknownTopicOrPartitionError):
        run(scenario())


def test_zookeeper_bootstrap_finds_brokers(brokers: BrokerFactory) -> None:
    from spark_replica.client import bootstrap_from_zookeeper

    first = brokers.start(1)
    second = brokers.start(2)
    found = sorted(bootstrap_from_zookeeper(brokers.zk_connect))
    assert found == sorted([(first.host, first.port), (second.host, second.port)])


def test_pipelined_requests_on_one_connection_are_answered_in_order(
    broker: BrokerProcess,
) -> None:
    from spark_replica.client import BrokerConnection
    from spark_replica.records import build_batch
    from spark_replica.wire.native.metadata import MetadataRequest
    from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic

    async def scenario() -> list[int]:
        await create_topic([(broker.host, broker.port)], "piped")
        conn = BrokerConnection(broker.host, broker.port)
        await conn.connect()
        try:
            requests = []
            for i in range(50):
                batch = build_batch([f"{i}-{j}".encode() for j in range(3)])
                topic = ProduceTopic("piped", [ProducePartition(0, batch)])
                requests.append(conn.send(ProduceRequest(1, 5000, [topic])))
                requests.append(conn.send(MetadataRequest(["piped"])))
            answers = await asyncio.gather(*requests)
            return [a.topics[0].partitions[0].base_offset for a in answers[::2]]
        finally:
            await conn.close()

    assert run(scenario()) == [3 * i for i in range(50)]
