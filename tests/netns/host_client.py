"""replog's client run on one of the cluster's hosts rather than on the clients' side:
`ip netns exec NS python -m tests.netns.host_client produce|read ...`.

A host cut from everyone can still be reached from inside its own namespace, which is
how a test writes to, and reads from, a leader that the rest of the cluster has lost:
what such a leader acknowledges, or lets a reader see, is what must never happen.
Each command prints one JSON line: the values acknowledged, or the values read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from spark_replica.client import Cluster, Consumer, ConsumerConfig, Producer, ProducerConfig
from spark_replica.errors import ReplogError
from spark_replica.topics import TopicPartition


async def produce(
    address: tuple[str, int], topic: str, values: list[str], timeout_ms: int, idempotent: bool
) -> None:
    """Prints {"acknowledged": [...], "seconds": how long until every value was answered}."""
    cluster = Cluster([address])
    config = ProducerConfig(
        acks=-1,
        delivery_timeout_ms=timeout_ms,
        request_timeout_ms=timeout_ms // 2,
        max_block_ms=timeout_ms,
        enable_idempotence=idempotent,
    )
    producer = Producer(cluster, config)
    started = time.monotonic()
    try:
        futures = [await producer.send_future(topic, v, partition=0) for v in values]
        await producer.flush()
        seconds = time.monotonic() - started
        acknowledged = [v for v, f in zip(values, futures, strict=True) if f.exception() is None]
    finally:
        await cluster.close()
    print(json.dumps({"acknowledged": acknowledged, "seconds": seconds}))


async def read(address: tuple[str, int], topic: str, duration_s: float) -> None:
    """Everything the broker lets a consumer read of partition 0 within `duration_s`."""
    cluster = Cluster([address])
    seen: list[str] = []
    try:
        consumer = Consumer(cluster, ConsumerConfig(api_timeout_ms=int(duration_s * 1000)))
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + duration_s
        while loop.time() < deadline:
            for chunk in await consumer.poll(max_wait_ms=200):
                seen.extend(v.decode() for v in chunk.records.column("value").to_pylist())
    except ReplogError as exc:
        print(json.dumps({"error": str(exc), "seen": seen}))
        return
    finally:
        await cluster.close()
    print(json.dumps(seen))


def main() -> None:
    parser = argparse.ArgumentParser(prog="host_client")
    parser.add_argument("command", choices=["produce", "read"])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("topic")
    parser.add_argument("--timeout-ms", type=int, default=4000)
    parser.add_argument("--no-idempotence", action="store_true")
    parser.add_argument("values", nargs="*")
    args = parser.parse_intermixed_args()
    address = (args.host, args.port)
    if args.command == "produce":
        asyncio.run(
            produce(address, args.topic, args.values, args.timeout_ms, not args.no_idempotence)
        )
    else:
        asyncio.run(read(address, args.topic, args.timeout_ms / 1000))


if __name__ == "__main__":
    main()
