"""`replog demo`: the main job, a Spark structured-streaming pipeline through a cluster.

Starts an embedded ZooKeeper and three broker processes (one becomes the controller),
creates an input and an output topic (three partitions, three replicas each), produces
keyed records with acks=all, then runs a Spark streaming query that reads the input
topic in micro-batches, transforms each record and writes it to the output topic
exactly once; a batch read of the output checks every record arrived once. It prints
what happened and stops every process it started.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from spark_replica.client import Admin, Cluster, Producer, ProducerConfig, parse_acks
from spark_replica.errors import ReplogError
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper

SOURCE = "demo-events"
SINK = "demo-enriched"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run ZooKeeper + 3 brokers and a Spark streaming pipeline through them"
    )
    parser.add_argument(
        "--records", type=int, default=100_000, help="records to produce (default 100000)"
    )
    parser.add_argument("--brokers", type=int, default=3, help="brokers to start (default 3)")
    parser.add_argument(
        "--batch",
        type=int,
        default=25_000,
        help="maxOffsetsPerTrigger of the streaming read (default 25000)",
    )
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
            asyncio.run(_prepare(bootstrap, args.records, len(brokers)))
            ok = _stream(bootstrap, args.records, args.batch, root / "checkpoint")
        except ReplogError as exc:
            print(f"demo failed: {exc}")
            return 1
        finally:
            for broker in brokers:
                broker.stop()
            zookeeper.stop()
        print("Stopped every process the demo started.")
    return 0 if ok else 1


async def _prepare(bootstrap: list[tuple[str, int]], records: int, brokers: int) -> None:
    cluster = Cluster(bootstrap, client_id="replog-demo")
    try:
        admin = Admin(cluster)
        replication = min(3, brokers)
        # Two copies before an acks=all answer, so that losing any one broker loses nothing
        # acknowledged (docs/design-notes.md, "Durability model").
        min_insync = min(2, replication)
        configs = {"min.insync.replicas": str(min_insync)}
        for topic in (SOURCE, SINK):
            await admin.create_topic(topic, 3, replication_factor=replication, configs=configs)
        print(
            f"Created topics {SOURCE} and {SINK}: 3 partitions, {replication} replicas each, "
            f"min.insync.replicas={min_insync}"
        )
        producer = Producer(cluster, ProducerConfig(acks=parse_acks("all")))
        keys = [f"user-{i % 97}" for i in range(records)]
        values = [f"event {i}" for i in range(records)]
        started = time.perf_counter()
        acked = await producer.send_records(SOURCE, values, keys)
        seconds = time.perf_counter() - started
        print(f"Produced {len(acked)} keyed records to {SOURCE} (acks=all) in {seconds:.2f} s")
        described = await admin.describe([SOURCE])
        for p in described[SOURCE]:
            isr = ",".join(map(str, p.isr))
            print(f"  partition {p.partition}: leader {p.leader}, isr {isr}, hw {p.high_watermark}")
    finally:
        await cluster.close()


def _stream(bootstrap: list[tuple[str, int]], records: int, batch: int, checkpoint: Path) -> bool:
    from spark_replica.tools.cli.demo_pipeline import run_pipeline

    servers = ",".join(f"{host}:{port}" for host, port in bootstrap)
    print(f"Starting Spark (local[2]) and the streaming query {SOURCE} -> {SINK}...", flush=True)
    result = run_pipeline(servers, SOURCE, SINK, checkpoint, batch)
    print(
        f"Streamed {sum(result.batches)} records in {len(result.batches)} micro-batches "
        f"({', '.join(map(str, result.batches))} rows) in {result.seconds:.1f} s"
    )
    print(f"{SINK} holds {result.output_rows} records:")
    for partition, count in result.per_partition.items():
        print(f"  partition {partition}: {count}")
    for key, value in result.sample:
        print(f"  {key}: {value}")
    if result.output_rows == result.distinct_outputs == records:
        print(f"Result: OK: each of the {records} records went through Spark exactly once")
        return True
    print(
        f"Result: MISMATCH: {records} in, {result.output_rows} out "
        f"({result.distinct_outputs} distinct)"
    )
    return False
