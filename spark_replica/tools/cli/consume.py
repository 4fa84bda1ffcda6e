"""`replog consume TOPIC`: print records, one per line, in offset order per partition.

Where it starts is Kafka's console consumer's choice: every partition at its end (the
high watermark) unless --from-beginning; or, with --partition N, that partition alone
at --offset (an offset, `earliest` or `latest`; default latest, or earliest with
--from-beginning). An offset outside what the partition holds is refused with the
range it does hold, rather than silently moved to the end as Kafka's consumer would.

What it prints: as text, the value, and with --property print.offset=true (and
print.timestamp, print.partition, print.headers, print.key, print.value, key.separator,
headers.separator, line.separator, null.literal) what Kafka's console consumer prints
under the same names; as `--format json`, JSON lines: one JSON object a line, a line a
record (record_format.py describes both, including how bytes that are not UTF-8 appear
in JSON: as {"base64": ...}).

--isolation-level read_committed (kafka-console-consumer's flag) reads only committed
transactions: up to the last stable offset, without the records of aborted ones, and
"latest" is the LSO; read_uncommitted, the default, reads everything up to the high
watermark. Transaction markers are never printed.

With --group G it starts where group G committed and commits what it printed
(consume_group.py says how, and why it needs --zookeeper or --dir).

A reader that stops reading (`| head -2`) ends the command quietly with exit 0, even
on a quiet topic: it notices between polls, not only at its next write.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from spark_replica.client import (
    EARLIEST,
    LATEST,
    Cluster,
    Consumer,
    ConsumerConfig,
    ConsumerRecord,
)
from spark_replica.client.consumer_records import IdleTimer, iter_records
from spark_replica.errors import ConfigError
from spark_replica.tools.cli.arguments import add_topic_argument
from spark_replica.tools.cli.common import add_connection_options, run_with_cluster
from spark_replica.tools.cli.consume_group import GroupProgress, open_group_admin
from spark_replica.tools.cli.output import plural, stdout_closed
from spark_replica.tools.cli.record_format import (
    EARLIEST_NAME,
    LATEST_NAME,
    TextFormat,
    format_json,
    parse_offset,
    parse_properties,
)
from spark_replica.topics import TopicPartition

Formatter = Callable[[ConsumerRecord, int], bytes]
POLL_WAIT_MS = 200


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consume",
        help="print records to standard output",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_topic_argument(parser, "the topic to read")
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest record (default: at the end, printing only new records)",
    )
    parser.add_argument(
        "--partition",
        type=int,
        metavar="N",
        help="read partition N only (default: every partition)",
    )
    parser.add_argument(
        "--group",
        metavar="GROUP",
        help="start where consumer group GROUP committed (elsewhere as without it) and "
        "commit what was printed, every few seconds and at the end (needs --zookeeper or "
        "--dir: groups live on the Kafka listeners; default: no group, nothing committed)",
    )
    parser.add_argument(
        "--offset",
        metavar="N|earliest|latest",
        help="with --partition, where to start: an offset, earliest or latest "
        "(default latest, or earliest with --from-beginning)",
    )
    parser.add_argument(
        "--max-records",
        "--max-messages",
        dest="max_records",
        type=int,
        metavar="N",
        help="exit after N records (--max-messages is the same, as Kafka's console "
        "consumer; default: no limit)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="exit after this many seconds with no record (default: wait for ever)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text lines as Kafka's console consumer prints them, or JSON lines: one JSON "
        "object a line per record, with topic, partition, offset, timestamp, "
        "timestamp_type, key, value, headers (default text)",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a text format setting, as Kafka's console consumer: print.timestamp, "
        "print.partition, print.offset, print.headers, print.key, print.value (true or "
        "false; all false but print.value by default), key.separator (default TAB), "
        "headers.separator (default ','), line.separator (default newline), null.literal "
        "(default null); may be repeated",
    )
    parser.add_argument(
        "--print-key",
        action="store_true",
        help="print each record's key before its value (same as --property print.key=true)",
    )
    parser.add_argument(
        "--key-separator",
        metavar="S",
        help="what follows each printed field (same as --property key.separator=S; default TAB)",
    )
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed reads only committed transactions, up to the last stable "
        "offset; read_uncommitted reads every record up to the high watermark, those of "
        "open and aborted transactions too (default read_uncommitted, as Kafka's)",
    )
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def formatter(args: argparse.Namespace) -> Formatter:
    """The --format, with --print-key, --key-separator and --property applied in that order."""
    shortcuts = TextFormat(
        print_key=args.print_key,
        key_separator=b"\t" if args.key_separator is None else args.key_separator.encode(),
    )
    text_format = parse_properties(args.property, shortcuts)
    if args.format == "json":
        if args.property or args.print_key or args.key_separator is not None:
            raise ConfigError(
                "--property, --print-key and --key-separator shape text output; "
                "--format json always prints every field"
            )
        return format_json
    return text_format.format


def start_offset(args: argparse.Namespace) -> int | str:
    """Where --partition starts: the --offset, else earliest or latest as Kafka's."""
    if args.offset is None:
        return EARLIEST_NAME if args.from_beginning else LATEST_NAME
    if args.partition is None:
        raise ConfigError("--offset needs --partition, as with Kafka's console consumer")
    if args.from_beginning:
        raise ConfigError("give --offset or --from-beginning, not both")
    return parse_offset(args.offset)


async def assign(consumer: Consumer, args: argparse.Namespace) -> list[TopicPartition]:
    if args.partition is None:
        return await consumer.assign_topic(args.topic)
    metadata = await consumer.cluster.ensure_topic(args.topic)
    count = len(metadata.partitions)
    if not 0 <= args.partition < count:
        raise ConfigError(
            f"topic {args.topic!r} has partitions 0..{count - 1}, not {args.partition}"
        )
    partition = TopicPartition(args.topic, args.partition)
    consumer.assign([partition])
    return [partition]


async def seek(consumer: Consumer, partitions: list[TopicPartition], start: int | str) -> None:
    if start == EARLIEST_NAME:
        await consumer.seek_to_beginning(partitions)
        return
    if start == LATEST_NAME:
        await consumer.seek_to_end(partitions)
        return
    assert isinstance(start, int)
    (partition,) = partitions
    earliest, _ = (await consumer.list_offsets(partitions, EARLIEST))[partition]
    latest, _ = (await consumer.list_offsets(partitions, LATEST))[partition]
    if not earliest <= start <= latest:
        held = f"offsets {earliest}..{latest - 1}" if latest > earliest else "no records"
        raise ConfigError(
            f"--offset {start} is outside {partition}, which holds {held} "
            f"(earliest {earliest}, latest {latest})"
        )
    consumer.seek(partition, start)


def run(args: argparse.Namespace) -> int:
    if args.max_records is not None and args.max_records <= 0:
        raise ConfigError(f"--max-records must be positive, not {args.max_records}")
    if args.timeout is not None and args.timeout <= 0:
        raise ConfigError(f"--timeout must be positive, not {args.timeout}")
    if args.partition is not None and args.partition < 0:
        raise ConfigError(f"--partition must be 0 or more, not {args.partition}")
    start = start_offset(args)
    format_record = formatter(args)
    if args.group is not None and args.offset is not None:
        raise ConfigError("give --offset or --group, not both: the group says where to start")
    group_admin = open_group_admin(args) if args.group is not None else None

    async def work(cluster: Cluster) -> int:
        consumer = Consumer(cluster, ConsumerConfig(isolation_level=args.isolation_level))
        partitions = await assign(consumer, args)
        await seek(consumer, partitions, start)
        loop = asyncio.get_running_loop()
        progress = None
        if group_admin is not None:
            progress = GroupProgress(group_admin, args.group, loop.time())
            for tp, offset in (await progress.start_offsets(partitions)).items():
                consumer.seek(tp, offset)
        try:
            printed = await print_records(consumer, args, format_record, progress)
        except BrokenPipeError:
            if progress is not None:
                await progress.commit(loop.time())
            raise
        finally:
            if group_admin is not None:
                await group_admin.close()
        if progress is not None:
            await progress.commit(loop.time())
        print(f"Processed a total of {plural(printed, 'record')}.", file=sys.stderr)
        return 0

    return run_with_cluster(args, work)


async def print_records(
    consumer: Consumer,
    args: argparse.Namespace,
    format_record: Formatter,
    progress: GroupProgress | None,
) -> int:
    """Print until --max-records, --timeout or the reader going; how many were printed."""
    out = sys.stdout.buffer
    loop = asyncio.get_running_loop()
    printed = 0
    idle = IdleTimer(args.timeout, loop.time())
    while args.max_records is None or printed < args.max_records:
        fetched = await consumer.poll(max_wait_ms=POLL_WAIT_MS)
        for chunk in fetched:
            for record in iter_records(chunk):
                if printed == args.max_records:
                    break
                out.write(format_record(record, chunk.timestamp_type))
                printed += 1
                if progress is not None:
                    progress.printed_record(chunk.tp, record.offset)
        out.flush()
        if progress is not None:
            await progress.commit_if_due(loop.time())
        if idle.expired(fetched, loop.time()) or (not fetched and stdout_closed()):
            return printed
    return printed
