"""`replog consume TOPIC`: print records, one per line, in offset order per partition."""

from __future__ import annotations

import argparse
import asyncio
import sys
from itertools import chain, islice

from spark_replica.cli.common import add_connection_options, run_with_cluster
from spark_replica.client import Cluster, Consumer
from spark_replica.client.consumer_records import IdleTimer, iter_records
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
        idle = IdleTimer(args.timeout, loop.time())
        while args.max_records is None or printed < args.max_records:
            fetched = await consumer.poll(max_wait_ms=200)
            remaining = None if args.max_records is None else args.max_records - printed
            for record in islice(chain.from_iterable(map(iter_records, fetched)), remaining):
                line = NULL if record.value is None else record.value
                if args.print_key:
                    line = (NULL if record.key is None else record.key) + separator + line
                out.write(line + b"\n")
                printed += 1
            out.flush()
            if idle.expired(fetched, loop.time()):
                break
        print(f"Processed a total of {printed} records.", file=sys.stderr)
        return 0

    return run_with_cluster(args, work)
