"""The producer client against real brokers: per-record sends with callbacks and futures,
batching, linger, flush, compression, several batches in flight through a leader
failover, and giving up at the delivery timeout when the in-sync replicas are too few."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig, RecordMetadata
from spark_replica.errors import (
    ConfigError,
    DeliveryTimeoutError,
    NotEnoughReplicasError,
    ReplogError,
)
from spark_replica.records import BatchHeader, iter_batches
from spark_replica.tools.launcher.brokers import BrokerProcess
from tests.support import (
    BrokerFactory,
    consume_all,
    create,
    create_topic,
    describe,
    leadership,
    read_everything,
    replog,
    rows_of,
    run,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

T = TypeVar("T")


def batch_headers(partition_dir: Path) -> list[BatchHeader]:
    """The headers of every batch a broker holds for one partition, read from its files."""
    return [
        header
        for segment in sorted(partition_dir.glob("*.log"))
        for header, _ in iter_batches(segment.read_bytes())
    ]


async def with_producer(
    bootstrap: list[tuple[str, int]],
    config: ProducerConfig,
    work: Callable[[Producer], Awaitable[T]],
) -> T:
    """Run `work` with a producer that is closed (flushed) afterwards."""
    cluster = Cluster(bootstrap)
    try:
        async with Producer(cluster, config) as producer:
            return await work(producer)
    finally:
        await cluster.close()


def test_records_are_batched_until_full_or_lingered(broker: BrokerProcess) -> None:
    """Per-record sends, half with a delivery callback and half with a future."""
    bootstrap = [(broker.host, broker.port)]
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        delivered.append((metadata, error))

    async def work(producer: Producer) -> list[int]:
        futures = []
        for i in range(95):
            if i % 2:
                await producer.send("batched", f"v{i}", on_delivery=on_delivery)
            else:
                futures.append(await producer.send_future("batched", f"v{i}", key=b"k"))
        # Nine full batches go now; the last five records linger until the linger ends.
        metadata = await asyncio.gather(*futures)
        return [m.offset for m in metadata]

    async def scenario() -> list[int]:
        await create_topic(bootstrap, "batched")
        config = ProducerConfig(acks=-1, batch_records=10, linger_ms=300)
        return await with_producer(bootstrap, config, work)

    assert run(scenario()) == list(range(0, 95, 2))
    assert [error for _, error in delivered] == [None] * 47
    assert [m.offset for m, _ in delivered if m is not None] == list(range(1, 95, 2))
    counts = [h.record_count for h in batch_headers(broker.log_dir / "batched-0")]
    assert counts == [10] * 9 + [5]


def test_flush_sends_what_lingers_and_close_refuses_more(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]

    async def scenario() -> None:
        await create_topic(bootstrap, "flushed", partitions=2)
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(acks=-1, linger_ms=600_000))
            futures = [
                await producer.send_future("flushed", f"v{i}", key=f"k{i % 7}") for i in range(50)
            ]
            await asyncio.sleep(0.2)
            assert not any(f.done() for f in futures), "a long linger holds them back"
            await asyncio.wait_for(producer.flush(), 20)
            assert all(f.done() and f.exception() is None for f in futures)
            late = await producer.send_future("flushed", "late", partition=1)
            await asyncio.wait_for(producer.close(), 20)
            assert (await late).offset >= 0, "close flushes first"
            with pytest.raises(ReplogError, match="closed"):
                await producer.send("flushed", "too late")
            other = Producer(cluster)
            with pytest.raises(ConfigError, match=r"partitions 0\.\.1"):
                await other.send("flushed", "x", partition=7)
            assert other.pool.used_bytes == 0, "a refused record holds no buffer memory"
        finally:
            await cluster.close()

    run(scenario())
    rows = rows_of(run(consume_all(bootstrap, "flushed", 51, partitions=2)))
    assert sorted(r["value"] for r in rows) == sorted(
        [f"v{i}".encode() for i in range(50)] + [b"late"]
    )


@pytest.mark.parametrize(("codec", "bits"), [("lz4", 3), ("zstd", 4)])
def test_compressed_batches_are_stored_and_served_as_sent(
    brokers: BrokerFactory, codec: str, bits: int
) -> None:
    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]
    values = [f"record {i} " * 30 for i in range(2_000)]

    async def scenario() -> None:
        await create_topic(bootstrap, "packed")
        config = ProducerConfig(acks=-1, compression=codec, batch_records=500)

        async def work(producer: Producer) -> None:
            await producer.send_records("packed", values, partition=0)

        await with_producer(bootstrap, config, work)

    run(scenario())
    headers = batch_headers(broker.log_dir / "packed-0")
    assert [h.attributes & 0x07 for h in headers] == [bits] * 4
    assert sum(h.total_size for h in headers) < sum(len(v) for v in values) // 10
    assert broker.stop() == 0
    broker = brokers.start(1)  # recovery checks the CRC of the compressed tail
    rows = rows_of(run(consume_all([(broker.host, broker.port)], "packed", len(values))))
    assert [r["value"].decode() for r in rows] == values


def test_five_in_flight_through_a_leader_kill_keep_order_without_duplicates(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap
    sent: list[str] = []

    async def scenario() -> None:
        await create(bootstrap, "inflight", rf=3, **{"min.insync.replicas": "2"})
        leader = (await describe(bootstrap, "inflight"))[0]["leader"]
        config = ProducerConfig(
            acks=-1,
            batch_records=25,
            linger_ms=2,
            max_in_flight_per_partition=5,
            delivery_timeout_ms=60_000,
        )

        async def work(producer: Producer) -> None:
            futures = []
            for i in range(6_000):
                value = f"r{i}"
                sent.append(value)
                futures.append(await producer.send_future("inflight", value, partition=0))
                if i % 100 == 99:
                    await asyncio.sleep(0)  # let batches go while more are added
                if i == 2_000:
                    await asyncio.to_thread(brokers.brokers[leader].kill)
            offsets = [m.offset for m in await asyncio.gather(*futures)]
            assert offsets == list(range(len(sent))), "offsets in send order"

        await with_producer(bootstrap, config, work)

    run(scenario(), timeout_s=180)
    survivors = [(b.host, b.port) for b in brokers.brokers.values() if b.process is not None]
    rows = run(read_everything(survivors, "inflight", len(sent)))
    assert [r["value"].decode() for r in rows] == sent, "once each, in order"


DELIVERY_TIMEOUT_MS = 3000


def test_too_few_in_sync_replicas_fail_at_the_delivery_timeout_naming_the_cause(
    brokers: BrokerFactory,
) -> None:
    """RF 3, min.insync.replicas 2, both followers killed: acks=all cannot succeed.

    The producer retries NOT_ENOUGH_REPLICAS until its delivery timeout, then fails the
    records with a DeliveryTimeoutError that says why; `replog produce` prints the same
    and exits 1.
    """
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def shrink_to_leader() -> int:
        await create(bootstrap, "starved", rf=3, **{"min.insync.replicas": "2"})
        leader = (await leadership(bootstrap, "starved"))[0]["leader"]
        for broker_id, broker in brokers.brokers.items():
            if broker_id != leader:
                await asyncio.to_thread(broker.kill)
        alone = [(brokers.brokers[leader].host, brokers.brokers[leader].port)]

        async def isr_is_the_leader() -> bool:
            return (await leadership(alone, "starved"))[0]["isr"] == [leader]

        await wait_for(isr_is_the_leader, timeout_s=60)
        return leader

    leader = run(shrink_to_leader())
    address = (brokers.brokers[leader].host, brokers.brokers[leader].port)
    config = ProducerConfig(delivery_timeout_ms=DELIVERY_TIMEOUT_MS)

    async def produce() -> float:
        started = asyncio.get_running_loop().time()
        with pytest.raises(DeliveryTimeoutError) as failure:
            await with_producer(
                [address], config, lambda p: p.send_records("starved", ["x", "y"], partition=0)
            )
        error = failure.value
        assert isinstance(error.last_error, NotEnoughReplicasError)
        assert not error.maybe_stored, "every attempt was refused before the append"
        message = str(error)
        assert "not enough in-sync replicas" in message
        assert f"ISR [{leader}]" in message and "min.insync.replicas=2" in message
        return asyncio.get_running_loop().time() - started

    elapsed = run(produce())
    assert DELIVERY_TIMEOUT_MS / 1000 - 1.5 <= elapsed < DELIVERY_TIMEOUT_MS / 1000 + 10

    cli = replog(
        "produce",
        "starved",
        "--bootstrap",
        f"{address[0]}:{address[1]}",
        "--delivery-timeout-ms",
        str(DELIVERY_TIMEOUT_MS),
        stdin=b"one line\n",
    )
    stderr = cli.stderr.decode()
    assert cli.returncode == 1, stderr
    assert "not enough in-sync replicas" in stderr and "min.insync.replicas=2" in stderr
    assert "Traceback" not in stderr


def test_an_open_batch_keeps_filling_while_the_window_is_full(broker: BrokerProcess) -> None:
    """Kafka's linger: a batch that could not go yet takes the records sent meanwhile.

    With one batch in flight at a time and the broker paused, the records sent while the
    first batch waits for its answer make one batch, not one per linger period.
    """
    bootstrap = [(broker.host, broker.port)]
    config = ProducerConfig(acks=1, linger_ms=1, max_in_flight_per_partition=1)

    async def scenario() -> list[int]:
        await create_topic(bootstrap, "filling")
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, config)
            await producer.send_records("filling", ["warm-up"])
            broker.pause()
            try:
                first = await producer.send_future("filling", "first")
                await asyncio.sleep(0.2)  # sent, and unanswered while the broker is paused
                later = []
                for i in range(50):
                    later.append(await producer.send_future("filling", f"v{i}"))
                    await asyncio.sleep(0.005)  # five linger periods between two records
            finally:
                broker.resume()
            offsets = [(await first).offset] + [(await f).offset for f in later]
            await asyncio.wait_for(producer.close(), 30)
            return offsets
        finally:
            await cluster.close()

    assert run(scenario()) == list(range(1, 52))
    counts = [h.record_count for h in batch_headers(broker.log_dir / "filling-0")]
    assert counts == [1, 1, 50]
