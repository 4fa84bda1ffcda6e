"""`replog consume TOPIC`: print records, one per line, in offset order per partition."""

from __future__ import annotations

import argparse
import asyncio
import sys

from spark_replica.cli.common import add_connection_options, run_with_cluster
from spark_replica.client import Cluster, Consumer
from spark_replica.errors import ConfigError

NULL = b"null"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("consume", help="print records to standard output")
    parser.add_argument("topic")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest")
    parser.add_argument("--max-records", type=int, help="exit after this many records")
    parser.add_argument("--timeout", type=float, help="exit after this many seconds with none")
    parser.add_argument("--print-key", action="store_true")
    parser.add_argument("--key-separator", default="\t", metavar="S")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.max_records is not None and args.max_records <= 0:
        raise ConfigError(f"--max-records must be positive, not {args.max_records}")
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError(f"--timeout must be positive, not {args.timeout}")
    out = sys.stdout.buffer
    separator = args.key_separator.encode()

    async def work(cluster: Cluster) -> int:
        consumer = Consumer(cluster)
        partitions = await consumer.assign_topic(args.topic)
        if args.from_beginning:
            await consumer.seek_to_beginning(partitions)
        else:
            await consumer.seek_to_end(partitions)
        loop = asyncio.get_running_loop()
        printed = 0
        last_record = loop.time()
        while args.max_records is None or printed < args.max_records:
            fetched = await consumer.poll(max_wait_ms=200)
            for chunk in fetched:
                keys = chunk.records.column("key").to_pylist()
                values = chunk.records.column("value").to_pylist()
                for key, value in zip(keys, values, strict=True):
                    line = NULL if value is None else value
                    if args.print_key:
                        line = (NULL if key is None else key) + separator + line
                    out.write(line + b"\n")
                    printed += 1
                    if args.max_records is not None and printed >= args.max_records:
                        break
                if args.max_records is not None and printed >= args.max_records:
                    break
            out.flush()
            if fetched:
                last_record = loop.time()
            elif args.timeout is not None and loop.time() - last_record > args.timeout:
                break
        print(f"Processed a total of {printed} records.", file=sys.stderr)
        return 0

    return run_with_cluster(args, work)
