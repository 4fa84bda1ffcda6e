"""SyncProducer against a real broker: sends from plain threads, callbacks and futures,
flush and close, and blocking on buffer.memory while the broker is paused."""

from __future__ import annotations

import threading
import time

import pytest

from spark_replica.client import ProducerConfig, RecordMetadata, SyncProducer
from spark_replica.errors import BufferExhaustedError, ConfigError, ReplogError
from spark_replica.tools.launcher.brokers import BrokerProcess
from tests.support import consume_all, create_topic, rows_of, run

pytestmark = pytest.mark.slow

THREADS = 3
PER_THREAD = 2_000


def test_records_sent_from_threads_are_delivered_once_in_order_per_thread(
    broker: BrokerProcess,
) -> None:
    address = f"{broker.host}:{broker.port}"
    run(create_topic([(broker.host, broker.port)], "synced"))
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []
    lock = threading.Lock()

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        with lock:
            delivered.append((metadata, error))

    def sender(producer: SyncProducer, thread: int) -> None:
        for i in range(PER_THREAD):
            producer.send("synced", f"t{thread}-{i}", on_delivery=on_delivery)

    with SyncProducer(address, ProducerConfig(linger_ms=5, batch_records=500)) as producer:
        first = producer.send_future("synced", "first")
        assert first.result(timeout=30).offset == 0
        threads = [
            threading.Thread(target=sender, args=(producer, n), name=f"sender-{n}")
            for n in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        producer.flush(timeout_s=60)
        assert len(delivered) == THREADS * PER_THREAD, "flush waits for every answer"
        with pytest.raises(ConfigError, match=r"partitions 0\.\.0, not 3"):
            producer.send("synced", "nowhere", partition=3)
        last = producer.send_future("synced", "last", key="k")
    assert last.done() and last.result().offset == THREADS * PER_THREAD + 1, "close flushes"
    with pytest.raises(ReplogError, match="closed"):
        producer.send("synced", "too late")

    assert all(error is None for _, error in delivered)
    offsets = sorted(m.offset for m, _ in delivered if m is not None)
    assert offsets == list(range(1, THREADS * PER_THREAD + 1))
    rows = rows_of(run(consume_all([(broker.host, broker.port)], "synced", len(offsets) + 2)))
    values = [r["value"].decode() for r in rows]
    assert len(values) == len(set(values)) == THREADS * PER_THREAD + 2
    for thread in range(THREADS):
        mine = [v for v in values if v.startswith(f"t{thread}-")]
        assert mine == [f"t{thread}-{i}" for i in range(PER_THREAD)], "each thread's order"


def test_send_blocks_on_a_full_buffer_then_raises_and_resumes_delivery(
    broker: BrokerProcess,
) -> None:
    address = f"{broker.host}:{broker.port}"
    run(create_topic([(broker.host, broker.port)], "blocked"))
    config = ProducerConfig(buffer_memory=32 * 1024, max_block_ms=1_000, linger_ms=1)
    value = b"v" * 1_000
    errors: list[BaseException | None] = []
    with SyncProducer(address, config) as producer:
        producer.send_future("blocked", "warm-up").result(timeout=30)
        broker.pause()
        try:
            taken = 0
            with pytest.raises(BufferExhaustedError, match=r"buffer\.memory"):
                for _ in range(100):
                    started = time.monotonic()
                    producer.send("blocked", value, on_delivery=lambda m, e: errors.append(e))
                    taken += 1
            assert time.monotonic() - started >= 0.9, "it blocked max_block_ms first"
            assert 0 < taken <= 32
        finally:
            broker.resume()
    assert errors == [None] * taken, "what was taken is delivered once the broker is back"


def test_a_delivery_callback_may_send_but_not_flush(broker: BrokerProcess) -> None:
    """Callbacks run on the I/O thread: a send from one is taken, a flush is refused."""
    address = f"{broker.host}:{broker.port}"
    run(create_topic([(broker.host, broker.port)], "chained"))
    outcomes: list[object] = []

    def chain(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        producer.send("chained", "second", on_delivery=lambda m, e: outcomes.append(m))
        try:
            producer.flush()
        except ReplogError as exc:
            outcomes.append(exc)

    with SyncProducer(address) as producer:
        producer.send("chained", "first", on_delivery=chain)
        producer.flush(timeout_s=30)
        producer.flush(timeout_s=30)  # the second record was sent during the first flush
    refused, delivered = outcomes
    assert isinstance(refused, ReplogError) and "not from a callback" in str(refused)
    assert isinstance(delivered, RecordMetadata) and delivered.offset == 1
