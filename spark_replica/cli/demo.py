"""`replog demo`: the main job while the Spark pipeline is being built.

Starts an embedded ZooKeeper and three broker processes (one of them becomes the
controller), creates a topic with three partitions replicated three times, produces
records with keys and acks=all, reads them all back, prints what each partition holds
and which replicas are in sync, and stops everything it started.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from spark_replica.client import Admin, Cluster, Consumer, Producer, ProducerConfig, parse_acks
from spark_replica.errors import ReplogError
from spark_replica.launcher import BrokerProcess, free_port
from spark_replica.zk.embedded import EmbeddedZooKeeper

TOPIC = "demo-events"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run ZooKeeper + 3 brokers, produce, consume")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=3)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="replog-demo-") as tmp:
        root = Path(tmp)
        zookeeper = EmbeddedZooKeeper(free_port(), root / "zookeeper")
        brokers: list[BrokerProcess] = []
        print(f"Starting ZooKeeper and {args.brokers} brokers...", flush=True)
        zookeeper.start()
        try:
            for broker_id in range(1, args.brokers + 1):
                broker = BrokerProcess(
                    broker_id, free_port(), root / f"broker-{broker_id}", zookeeper.connect_string
                )
                brokers.append(broker)
                broker.start()
                print(f"  broker {broker_id} up on {broker.address} (pid {broker.pid})")
            bootstrap = [(b.host, b.port) for b in brokers]
            asyncio.run(_exercise(bootstrap, args.records, len(brokers)))
        except ReplogError as exc:
            print(f"demo failed: {exc}")
            return 1
        finally:
            for broker in brokers:
                broker.stop()
            zookeeper.stop()
        print("Stopped every process the demo started.")
    return 0


async def _exercise(bootstrap: list[tuple[str, int]], records: int, partitions: int) -> None:
    cluster = Cluster(bootstrap, client_id="replog-demo")
    try:
        replication = min(3, partitions)
        await Admin(cluster).create_topic(TOPIC, partitions, replication_factor=replication)
        producer = Producer(cluster, ProducerConfig(acks=parse_acks("all")))
        keys = [f"user-{i % 97}" for i in range(records)]
        values = [f"event {i}" for i in range(records)]
        started = time.perf_counter()
        acked = await producer.send_records(TOPIC, values, keys)
        produce_s = time.perf_counter() - started
        print(f"Produced {len(acked)} records (acks=all) in {produce_s:.2f} s")

        consumer = Consumer(cluster)
        await consumer.assign_topic(TOPIC)
        counts: dict[int, int] = {}
        seen = 0
        started = time.perf_counter()
        while seen < records and time.perf_counter() - started < 60:
            for chunk in await consumer.poll(max_wait_ms=200):
                counts[chunk.tp.partition] = (
                    counts.get(chunk.tp.partition, 0) + chunk.records.num_rows
                )
                seen += chunk.records.num_rows
        consume_s = time.perf_counter() - started
        print(f"Consumed {seen} records as Arrow batches in {consume_s:.2f} s")
        described = await Admin(cluster).describe([TOPIC])
        print(f"{'partition':>9} {'leader':>6} {'isr':>7} {'records':>8} {'high watermark':>14}")
        for p in described[TOPIC]:
            held = counts.get(p.partition, 0)
            isr = ",".join(map(str, p.isr))
            print(f"{p.partition:>9} {p.leader:>6} {isr:>7} {held:>8} {p.high_watermark:>14}")
        if seen == records == len(acked):
            print("Result: OK: every acknowledged record was read back exactly once")
        else:
            print(f"Result: MISMATCH: produced {len(acked)}, read {seen}")
    finally:
        await cluster.close()
