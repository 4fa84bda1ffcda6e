"""buffer.memory against a real broker that stops answering: sends wait, then fail typed.

The broker is paused (SIGSTOP), so every batch stays unanswered and holds its records'
memory: the producer takes records until buffer_memory is used up, the next send waits
max_block_ms and raises BufferExhaustedError, and once the broker is resumed every
record that was taken is delivered.
"""

from __future__ import annotations

import asyncio

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig, RecordMetadata
from spark_replica.errors import BufferExhaustedError, MessageTooLargeError
from spark_replica.tools.launcher.brokers import BrokerProcess
from tests.support import consume_all, create_topic, rows_of, run

pytestmark = pytest.mark.slow

BUFFER_MEMORY = 64 * 1024
MAX_BLOCK_MS = 1_500
VALUE = b"v" * 1_000


def test_a_full_buffer_blocks_sends_then_fails_them_naming_buffer_memory(
    broker: BrokerProcess,
) -> None:
    bootstrap = [(broker.host, broker.port)]
    config = ProducerConfig(
        buffer_memory=BUFFER_MEMORY, max_block_ms=MAX_BLOCK_MS, batch_size=4_096, linger_ms=1
    )
    outcomes: list[BaseException | None] = []

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        outcomes.append(error)

    async def scenario() -> int:
        await create_topic(bootstrap, "buffered")
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, config)
            await producer.send_records("buffered", ["warm-up"])  # identity and connection
            with pytest.raises(MessageTooLargeError, match=r"buffer\.memory"):
                await producer.send("buffered", b"x" * (BUFFER_MEMORY + 1))
            broker.pause()
            try:
                taken = 0
                loop = asyncio.get_running_loop()
                with pytest.raises(BufferExhaustedError) as refused:
                    for _ in range(BUFFER_MEMORY // len(VALUE) + 10):
                        started = loop.time()
                        await producer.send("buffered", VALUE, on_delivery=on_delivery)
                        taken += 1
                        assert producer.pool.used_bytes <= BUFFER_MEMORY
                waited = loop.time() - started
                assert waited >= MAX_BLOCK_MS / 1000 * 0.9, "it waited max_block_ms first"
                assert "buffer.memory" in str(refused.value)
                assert f"max_block_ms={MAX_BLOCK_MS}" in str(refused.value)
                assert taken >= BUFFER_MEMORY // (2 * len(VALUE)), "the buffer was used"
                assert not outcomes, "nothing answered while the broker is paused"
            finally:
                broker.resume()
            await asyncio.wait_for(producer.close(), 60)
            assert producer.pool.used_bytes == 0, "every batch gave its memory back"
            return taken
        finally:
            await cluster.close()

    taken = run(scenario())
    assert outcomes == [None] * taken, "every record taken is delivered after the resume"
    rows = rows_of(run(consume_all(bootstrap, "buffered", taken + 1)))
    assert [r["value"] for r in rows] == [b"warm-up"] + [VALUE] * taken, "once each"
