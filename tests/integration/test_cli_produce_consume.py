"""`replog produce` and `replog consume` against a real broker: lines as typed, records
as printed, failures as reported."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from spark_replica.client import Cluster, Consumer, parse_bootstrap
from spark_replica.client.consumer_records import iter_records
from spark_replica.tools.launcher.brokers import BrokerProcess
from tests.support import CLI_TIMEOUT_S, create_topic, replog, run

pytestmark = pytest.mark.slow

# A typed line must reach a consumer within this long once the producer is running.
INTERACTIVE_DEADLINE_S = 2.0
# Starting Python and connecting may take long on a busy machine; the deadline above
# applies to the line typed after that.
STARTUP_DEADLINE_S = 60.0


async def wait_for_values(
    address: str, topic: str, expected: list[bytes], deadline_s: float
) -> float:
    """Read `topic` from the beginning until `expected` are its values; the seconds it took."""
    cluster = Cluster(parse_bootstrap(address))
    started = time.monotonic()
    try:
        consumer = Consumer(cluster)
        await consumer.assign_topic(topic)
        await consumer.seek_to_beginning()
        seen: list[bytes | None] = []
        while seen != expected:
            assert time.monotonic() - started < deadline_s, f"saw only {seen} of {expected}"
            for chunk in await consumer.poll(max_wait_ms=50):
                seen.extend(record.value for record in iter_records(chunk))
        return time.monotonic() - started
    finally:
        await cluster.close()


def bootstrap(broker: BrokerProcess) -> list[tuple[str, int]]:
    return [(broker.host, broker.port)]


def test_each_typed_line_reaches_a_consumer_before_stdin_closes(broker: BrokerProcess) -> None:
    run(create_topic(bootstrap(broker), "typed"))
    where = ("--bootstrap", broker.address)
    producer = subprocess.Popen(
        [sys.executable, "-m", "spark_replica.tools.cli.main", "produce", "typed", *where],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert producer.stdin is not None
    try:
        producer.stdin.write(b"first\n")
        producer.stdin.flush()
        run(wait_for_values(broker.address, "typed", [b"first"], STARTUP_DEADLINE_S))
        producer.stdin.write(b"second\n")
        producer.stdin.flush()
        took = run(
            wait_for_values(broker.address, "typed", [b"first", b"second"], INTERACTIVE_DEADLINE_S)
        )
        assert took < INTERACTIVE_DEADLINE_S
        assert producer.poll() is None, "the producer still waits for more lines"
        _, stderr = producer.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        producer.kill()
        producer.wait(timeout=CLI_TIMEOUT_S)
    assert producer.returncode == 0, stderr
    assert b"2 records acknowledged." in stderr


def test_bulk_input_is_all_sent(broker: BrokerProcess) -> None:
    run(create_topic(bootstrap(broker), "bulk", partitions=3))
    lines = b"".join(b"%d\n" % n for n in range(50_000))
    produced = replog("produce", "bulk", "--bootstrap", broker.address, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    assert b"50000 records acknowledged." in produced.stderr
    consumed = replog(
        "consume",
        "bulk",
        "--from-beginning",
        "--max-records",
        "50000",
        "--bootstrap",
        broker.address,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines(), key=int) == lines.splitlines()


def test_records_that_fail_are_reported_by_line_and_the_exit_status_says_so(
    broker: BrokerProcess,
) -> None:
    run(create_topic(bootstrap(broker), "one"))
    where = ["--bootstrap", broker.address]
    no_partition = replog("produce", "one", "--partition", "5", *where, stdin=b"a\nb\n")
    assert no_partition.returncode == 1
    assert b"line 1 not sent: topic 'one' has partitions 0..0, not 5" in no_partition.stderr
    no_topic = replog("produce", "nowhere", *where, stdin=b"a\nb\n")
    assert no_topic.returncode == 1
    assert b"line 1 not sent:" in no_topic.stderr and b"nowhere" in no_topic.stderr
    assert no_topic.stderr.endswith(
        b"0 records acknowledged. 1 failed, 0 lines skipped."
        b" Stopped reading at line 1: later lines were not sent.\n"
    )

    run(create_topic(bootstrap(broker), "small", **{"max.message.bytes": "2000"}))
    refused_by_broker = replog("produce", "small", *where, stdin=b"x" * 5000 + b"\n")
    assert refused_by_broker.returncode == 1
    assert b"line 1 not sent: batch of" in refused_by_broker.stderr
    assert b"0 records acknowledged. 1 failed" in refused_by_broker.stderr

    malformed = replog("produce", "one", "--key-separator", ":", *where, stdin=b"k:1\nnokey\nk:3\n")
    assert malformed.returncode == 2
    assert b"line 2 has no key separator ':'; skipped" in malformed.stderr
    assert b"2 records acknowledged." in malformed.stderr
    printed = replog("consume", "one", "--from-beginning", "--max-records", "2", *where)
    assert printed.stdout == b"1\n3\n"


def test_headers_and_keys_round_trip(broker: BrokerProcess) -> None:
    run(create_topic(bootstrap(broker), "tagged"))
    where = ["--bootstrap", broker.address]
    lines = b'source:web,trace:abc\tuser1\t{"n": 1}\n\tuser2\tplain\n'
    produced = replog(
        "produce", "tagged", "--parse-headers", "--key-separator", "\t", *where, stdin=lines
    )
    assert produced.returncode == 0, produced.stderr
    printed = replog(
        "consume",
        "tagged",
        "--from-beginning",
        "--max-records",
        "2",
        *("--property", "print.headers=true", "--property", "print.key=true"),
        *where,
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == b'source:web,trace:abc\tuser1\t{"n": 1}\nNO_HEADERS\tuser2\tplain\n'

    as_json = replog(
        "consume", "tagged", "--from-beginning", "--max-records", "2", "--format", "json", *where
    )
    documents = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(d["key"], d["value"], d["headers"]) for d in documents] == [
        (
            "user1",
            '{"n": 1}',
            [{"key": "source", "value": "web"}, {"key": "trace", "value": "abc"}],
        ),
        ("user2", "plain", []),
    ]
    assert all(d["topic"] == "tagged" and d["partition"] == 0 for d in documents)
    assert [d["offset"] for d in documents] == [0, 1]
    assert all(isinstance(d["timestamp"], int) and d["timestamp"] > 0 for d in documents)


def test_consume_one_partition_from_an_offset(broker: BrokerProcess) -> None:
    run(create_topic(bootstrap(broker), "split", partitions=2))
    where = ["--bootstrap", broker.address]
    before_ms = int(time.time() * 1000)
    for partition, values in ((0, b"x\ny\n"), (1, b"a\nb\nc\nd\n")):
        produced = replog("produce", "split", "--partition", str(partition), *where, stdin=values)
        assert produced.returncode == 0, produced.stderr
    shown = ("print.offset", "print.partition", "print.timestamp")
    from_two = replog(
        "consume",
        "split",
        *("--partition", "1", "--offset", "2", "--max-records", "2"),
        *(argument for name in shown for argument in ("--property", f"{name}=true")),
        *where,
    )
    assert from_two.returncode == 0, from_two.stderr
    rows = [line.split(b"\t") for line in from_two.stdout.splitlines()]
    assert [row[1:] for row in rows] == [
        [b"Partition:1", b"Offset:2", b"c"],
        [b"Partition:1", b"Offset:3", b"d"],
    ]
    for row in rows:
        kind, _, stamp = row[0].partition(b":")
        assert kind == b"CreateTime" and before_ms <= int(stamp) <= time.time() * 1000

    earliest = replog(
        "consume", "split", "--partition", "0", "--offset", "earliest", "--timeout", "1", *where
    )
    assert earliest.stdout == b"x\ny\n"
    latest = replog(
        "consume", "split", "--partition", "0", "--offset", "latest", "--timeout", "1", *where
    )
    assert latest.returncode == 0 and latest.stdout == b""
    beyond = replog("consume", "split", "--partition", "1", "--offset", "9", *where)
    assert beyond.returncode == 2
    assert b"--offset 9 is outside split-1, which holds offsets 0..3" in beyond.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--offset", "3"), b"--offset needs --partition"),
        (("--partition", "0", "--offset", "soon"), b"use a non-negative offset, earliest"),
        (("--partition", "0", "--offset", "-2"), b"use a non-negative offset"),
        (("--partition", "0", "--offset", "1", "--from-beginning"), b"not both"),
        (("--property", "print.offsets=true"), b"'print.offsets' is not known"),
        (("--property", "print.offset=1"), b"use true or false"),
        (("--format", "json", "--property", "print.key=true"), b"--format json"),
    ],
)
def test_bad_consume_arguments_are_clear_errors(arguments: tuple[str, ...], message: bytes) -> None:
    refused = replog("consume", "t", *arguments, "--bootstrap", "127.0.0.1:1")
    assert refused.returncode == 2
    assert message in refused.stderr


def test_stdin_closed_at_once_sends_nothing_and_succeeds(broker: BrokerProcess) -> None:
    run(create_topic(bootstrap(broker), "empty"))
    produced = replog("produce", "empty", "--bootstrap", broker.address, stdin=b"")
    assert produced.returncode == 0, produced.stderr
    assert b"0 records acknowledged." in produced.stderr


def test_a_last_line_without_newline_is_sent(broker: BrokerProcess) -> None:
    run(create_topic(bootstrap(broker), "tail"))
    produced = replog("produce", "tail", "--bootstrap", broker.address, stdin=b"a\r\nb")
    assert produced.returncode == 0, produced.stderr
    run(wait_for_values(broker.address, "tail", [b"a", b"b"], STARTUP_DEADLINE_S))
