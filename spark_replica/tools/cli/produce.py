"""`replog produce TOPIC`: one record per line of standard input, sent as it is read.

Each line goes to the producer as soon as it is read, and its batch leaves after
--linger-ms (default 5), so a person typing sees every line arrive; piped bulk input
fills batches up to the producer's batch size instead. Standard input is read in a
thread, whatever is available at a time (a line from a terminal, up to 64 KiB from a
pipe or file), so the event loop keeps sending while the next read waits.

A line is `[HEADERS<TAB>][KEY<SEP>]VALUE`: with --key-separator SEP the part before
the first SEP is the record's key; with --parse-headers the part before the first
--headers-delimiter (default TAB) holds headers, `name:value` pairs joined by
--header-separator (default `,`), name and value split at --header-key-separator
(default `:`), as Kafka's console producer with parse.headers=true reads them
(record_format.py has the rules). An empty headers part means no headers.

Failures are reported on standard error: each malformed line with its number, and
each reason a record was not sent once, with the first line it stopped (later lines
failing alike are only counted in the summary). A line that does not fit the format
is skipped and the rest go on; a record the brokers did not acknowledge within
--delivery-timeout-ms (retries included), or refused for good (a min.insync.replicas
above the replication factor, at once), is reported when that is known and the rest
go on; a record the producer refuses to take at all (the topic or the --partition
does not exist, no buffer room within max.block.ms) stops reading, since every later
line would meet the same refusal. The exit status is 0 when every line was
acknowledged, 2 when a line did not fit the format, else 1 when any record failed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import threading
from collections.abc import AsyncIterator

from spark_replica.client import Cluster, Producer, ProducerConfig, RecordMetadata, parse_acks
from spark_replica.errors import ConfigError, ReplogError
from spark_replica.tools.cli.arguments import add_topic_argument
from spark_replica.tools.cli.common import add_connection_options, run_with_cluster
from spark_replica.tools.cli.output import plural
from spark_replica.tools.cli.record_format import (
    DEFAULT_HEADER_KEY_SEPARATOR,
    DEFAULT_HEADER_SEPARATOR,
    DEFAULT_HEADERS_DELIMITER,
    PRODUCER_PROPERTIES,
    LineFormat,
    parse_producer_properties,
)

DEFAULT_DELIVERY_TIMEOUT_MS = ProducerConfig.delivery_timeout_ms
DEFAULT_LINGER_MS = ProducerConfig.linger_ms
READ_BYTES = 64 * 1024
# Chunks read ahead of the producer; the reader waits beyond this (bounded memory).
QUEUED_CHUNKS = 16


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "produce",
        help="send standard input, one record per line, as each line is read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_topic_argument(parser, "the topic to send to")
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
    parser.add_argument(
        "--linger-ms",
        type=int,
        default=DEFAULT_LINGER_MS,
        metavar="MS",
        help="how long a batch waits for more lines before it is sent "
        f"(default {DEFAULT_LINGER_MS})",
    )
    parser.add_argument(
        "--partition",
        type=int,
        metavar="N",
        help="send every record to partition N (default: by key, else spread over partitions)",
    )
    parser.add_argument(
        "--key-separator",
        metavar="S",
        help="split each line into KEY S VALUE at the first S (default: no key)",
    )
    parser.add_argument(
        "--parse-headers",
        action="store_true",
        help="each line starts with headers, name:value,name:value, ended by the headers "
        "delimiter (default: lines carry no headers)",
    )
    parser.add_argument(
        "--headers-delimiter",
        default=DEFAULT_HEADERS_DELIMITER,
        metavar="S",
        help="with --parse-headers, what ends a line's headers (default TAB)",
    )
    parser.add_argument(
        "--header-separator",
        default=DEFAULT_HEADER_SEPARATOR,
        metavar="S",
        help="with --parse-headers, what separates two headers "
        f"(default {DEFAULT_HEADER_SEPARATOR!r})",
    )
    parser.add_argument(
        "--header-key-separator",
        default=DEFAULT_HEADER_KEY_SEPARATOR,
        metavar="S",
        help="with --parse-headers, what separates a header's name from its value "
        f"(default {DEFAULT_HEADER_KEY_SEPARATOR!r})",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a line format setting, as Kafka's console producer: "
        f"{', '.join(PRODUCER_PROPERTIES)} (parse.* true or false; key.separator applies "
        "with parse.key=true, default TAB); may be repeated, wins over the flags above",
    )
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def line_format(args: argparse.Namespace) -> LineFormat:
    """The flags' layout, then --property settings on top, in Kafka's names."""
    flags = LineFormat(
        key_separator=args.key_separator.encode() if args.key_separator is not None else None,
        headers_delimiter=args.headers_delimiter.encode() if args.parse_headers else None,
        header_separator=args.header_separator.encode(),
        header_key_separator=args.header_key_separator.encode(),
    )
    return parse_producer_properties(args.property, flags)


class Outcomes:
    """What became of each line: counts, and a line on standard error per failure
    reason (the first line it stopped; later lines failing alike are only counted, so a
    topic that refuses every record says why once, not once a line)."""

    def __init__(self) -> None:
        self.acknowledged = 0
        self.failed = 0
        self.malformed = 0
        self.reasons: set[str] = set()
        self.stopped_at: int | None = None  # the line whose refusal stopped the reading

    def delivered(
        self, number: int, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        if error is None:
            self.acknowledged += 1
        else:
            self.record_failed(number, error)

    def record_failed(self, number: int, error: BaseException) -> None:
        self.failed += 1
        reason = str(error)
        if reason not in self.reasons:
            self.reasons.add(reason)
            print(f"replog: line {number} not sent: {reason}", file=sys.stderr, flush=True)

    def stopped(self, number: int, error: BaseException) -> None:
        """The producer refused line `number` outright: nothing after it is read."""
        self.record_failed(number, error)
        self.stopped_at = number

    def line_malformed(self, error: ConfigError) -> None:
        self.malformed += 1
        print(f"replog: {error}; skipped", file=sys.stderr, flush=True)

    def exit_status(self) -> int:
        if self.malformed:
            return 2
        return 1 if self.failed else 0

    def summary(self) -> str:
        text = f"{plural(self.acknowledged, 'record')} acknowledged."
        if self.failed or self.malformed:
            text += f" {self.failed} failed, {plural(self.malformed, 'line')} skipped."
        if self.stopped_at is not None:
            text += f" Stopped reading at line {self.stopped_at}: later lines were not sent."
        return text


async def read_chunks(fd: int) -> AsyncIterator[bytes]:
    """What `fd` gives, a read at a time, from a thread so the loop never blocks on it.

    The thread is a daemon: when the command ends before the input does (a refused
    record), the process does not wait for a read that may never return.
    """
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes | BaseException] = asyncio.Queue(QUEUED_CHUNKS)

    def pump() -> None:
        while True:
            try:
                chunk: bytes | BaseException = os.read(fd, READ_BYTES)
            except OSError as exc:
                chunk = exc
            try:
                asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
            except RuntimeError:  # the loop is gone: nobody reads any more
                return
            if not chunk or isinstance(chunk, BaseException):
                return

    threading.Thread(target=pump, name="replog-stdin", daemon=True).start()
    while True:
        chunk = await chunks.get()
        if isinstance(chunk, BaseException):
            raise ConfigError(f"cannot read standard input: {chunk}")
        if not chunk:
            return
        yield chunk


async def read_lines(fd: int) -> AsyncIterator[list[bytes]]:
    """The complete lines of each read, without their line ends (`\\n` or `\\r\\n`).

    A line that spans reads waits for its end; a last line without one still counts.
    """
    partial: list[bytes] = []
    async for chunk in read_chunks(fd):
        if b"\n" not in chunk:
            partial.append(chunk)
            continue
        if partial:
            partial.append(chunk)
            chunk = b"".join(partial)
            partial = []
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if tail:
            partial.append(tail)
        yield [line[:-1] if line.endswith(b"\r") else line for line in lines]
    if partial:
        last = b"".join(partial)
        yield [last[:-1] if last.endswith(b"\r") else last]


async def send_lines(
    producer: Producer, args: argparse.Namespace, parse: LineFormat, outcomes: Outcomes
) -> None:
    """Send each line as it is read; stop at the first record the producer refuses."""
    number = 0
    async for lines in read_lines(sys.stdin.fileno()):
        for line in lines:
            number += 1
            try:
                record = parse.parse(line, number)
            except ConfigError as exc:
                outcomes.line_malformed(exc)
                continue
            try:
                await producer.send(
                    args.topic,
                    record.value,
                    record.key,
                    args.partition,
                    headers=record.headers,
                    on_delivery=functools.partial(outcomes.delivered, number),
                )
            except ReplogError as exc:
                outcomes.stopped(number, exc)
                return
        # Let the partitions' senders run between reads, however fast the input comes.
        await asyncio.sleep(0)


def run(args: argparse.Namespace) -> int:
    config = ProducerConfig(
        acks=parse_acks(args.acks),
        delivery_timeout_ms=args.delivery_timeout_ms,
        linger_ms=args.linger_ms,
    )
    parse = line_format(args)
    if args.partition is not None and args.partition < 0:
        raise ConfigError(f"--partition must be 0 or more, not {args.partition}")

    async def work(cluster: Cluster) -> int:
        outcomes = Outcomes()
        producer = Producer(cluster, config)
        try:
            await send_lines(producer, args, parse, outcomes)
        finally:
            await producer.close()
        print(outcomes.summary(), file=sys.stderr)
        return outcomes.exit_status()

    return run_with_cluster(args, work)
