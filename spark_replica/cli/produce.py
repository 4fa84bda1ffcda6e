"""`replog produce TOPIC`: one record per line of standard input.

Exits 0 only when every record was acknowledged; otherwise prints why and exits 1.
Retriable failures (no leader, too few in-sync replicas) are retried until
--delivery-timeout-ms, and the message then names the cause.
"""

from __future__ import annotations

import argparse
import sys

from spark_replica.cli.common import add_connection_options, run_with_cluster
from spark_replica.client import Cluster, Producer, ProducerConfig, parse_acks
from spark_replica.errors import ConfigError

LINES_PER_SEND = 10_000
DEFAULT_DELIVERY_TIMEOUT_MS = ProducerConfig.delivery_timeout_ms


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("produce", help="send standard input, one record per line")
    parser.add_argument("topic")
    parser.add_argument(
        "--acks",
        default="all",
        help="0, 1 or all (default all: every in-sync replica has the record, and the "
        "producer is idempotent, so a retry never stores a line twice)",
    )
    parser.add_argument(
        "--delivery-timeout-ms",
        type=int,
        default=DEFAULT_DELIVERY_TIMEOUT_MS,
        metavar="MS",
        help="give up on a record this long after it was sent, retries included "
        f"(default {DEFAULT_DELIVERY_TIMEOUT_MS})",
    )
    parser.add_argument("--key-separator", metavar="S", help="split each line into key S value")
    parser.add_argument("--partition", type=int, help="send every record to this partition")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def split_line(line: bytes, separator: bytes | None, number: int) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise ConfigError(f"line {number} has no key separator {separator.decode()!r}")
    return key, value


def run(args: argparse.Namespace) -> int:
    config = ProducerConfig(
        acks=parse_acks(args.acks), delivery_timeout_ms=args.delivery_timeout_ms
    )
    separator = args.key_separator.encode() if args.key_separator else None

    async def work(cluster: Cluster) -> int:
        producer = Producer(cluster, config)
        keys: list[bytes | None] = []
        values: list[bytes] = []
        sent = 0
        for number, raw in enumerate(sys.stdin.buffer, start=1):
            key, value = split_line(raw.rstrip(b"\r\n"), separator, number)
            keys.append(key)
            values.append(value)
            if len(values) >= LINES_PER_SEND:
                sent += len(
                    await producer.send_records(args.topic, values, keys, partition=args.partition)
                )
                keys, values = [], []
        if values:
            sent += len(
                await producer.send_records(args.topic, values, keys, partition=args.partition)
            )
        print(f"{sent} records acknowledged.", file=sys.stderr)
        return 0

    return run_with_cluster(args, work)
