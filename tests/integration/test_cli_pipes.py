"""Output that pipes: every listing and consume, run as a real `replog` process whose
reader goes away (`| head -1`), ends quietly with exit 0 and no traceback; every
`--json` is one document; `reassign --generate` writes its plan with --output.

One broker for the module, seeded once with what every listing lists: a topic with a
config and records, a consumer group's offsets, an ACL, a SCRAM user and a checkpoint
directory without batches.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import CLI_TIMEOUT_S, BrokerFactory, replog, replog_in_process

pytestmark = pytest.mark.slow

TOPIC = "piped"
GROUP = "piped-group"
RECORDS = 3000
REPLOG = [sys.executable, "-m", "spark_replica.tools.cli.main"]


@dataclass(frozen=True)
class Seeded:
    native: list[str]
    kafka: list[str]
    zookeeper: list[str]
    checkpoint: Path
    scratch: Path


def seeded_ok(*args: str, stdin: bytes = b"") -> None:
    done = replog_in_process(*args, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()


def produced(*args: str, stdin: bytes) -> None:
    """produce reads standard input's descriptor itself: it runs as a process."""
    done = replog("produce", *args, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()


@pytest.fixture(scope="module")
def seeded(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Seeded]:
    root = tmp_path_factory.mktemp("cli-pipes")
    factory = BrokerFactory(f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}", root)
    try:
        broker = factory.start(1)
        cluster = Seeded(
            native=["--bootstrap-server", broker.address],
            kafka=["--bootstrap-server", factory.kafka_bootstrap()],
            zookeeper=["--zookeeper", factory.zk_connect],
            checkpoint=root / "checkpoint",
            scratch=root,
        )
        seeded_ok("topics", "create", TOPIC, "--config", "retention.ms=600000", *cluster.native)
        lines = b"".join(b"record-%d\n" % n for n in range(RECORDS))
        produced(TOPIC, *cluster.native, stdin=lines)
        seeded_ok(
            "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", "--execute",
            *cluster.kafka,
        )  # fmt: skip
        seeded_ok(
            "acls", "add", "--allow-principal", "User:bob", "--operation", "Read",
            "--topic", TOPIC, *cluster.native,
        )  # fmt: skip
        seeded_ok("users", "create", "alice", "--password-stdin", *cluster.native, stdin=b"pw\n")
        (cluster.checkpoint / "offsets").mkdir(parents=True)
        (cluster.checkpoint / "commits").mkdir()
        yield cluster
    finally:
        factory.stop_all()


def listings(c: Seeded) -> list[list[str]]:
    """Every command that prints a listing, each as a table and as --json."""
    commands = [
        ["topics", "list", *c.native],
        ["topics", "describe", *c.native],
        ["configs", "describe", "--topic", TOPIC, *c.zookeeper],
        ["elect-leaders", "--topic", TOPIC, *c.zookeeper],
        ["reassign", "--status", *c.zookeeper],
        ["reassign", "--generate", "--brokers", "1", "--topics", TOPIC, *c.zookeeper],
        ["groups", "list", *c.kafka],
        ["groups", "describe", GROUP, *c.kafka],
        ["acls", "list", *c.native],
        ["users", "list", *c.native],
        ["lag", "--checkpoint", str(c.checkpoint), *c.native],
    ]
    return [form for command in commands for form in (command, [*command, "--json"])]


def test_every_listing_ends_quietly_when_its_reader_has_gone(seeded: Seeded) -> None:
    """The reader closes the pipe before the command writes (`| head -0`): each one's
    first write fails, deterministically, however short its output."""
    running = []
    for number, command in enumerate(listings(seeded)):
        stderr = (seeded.scratch / f"listing-{number}.stderr").open("wb")
        process = subprocess.Popen(
            [*REPLOG, *command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr
        )
        assert process.stdout is not None
        process.stdout.close()
        running.append((command, process, stderr))
    failures = []
    for command, process, stderr in running:
        try:
            code = process.wait(timeout=CLI_TIMEOUT_S)
        finally:
            process.kill()
            stderr.close()
        said = Path(stderr.name).read_text().strip().splitlines()
        if code != 0 or said:
            failures.append(f"replog {' '.join(command)}: exit {code}, stderr ends {said[-1:]}")
    assert not failures, "\n".join(failures)


def consume_into_head(seeded: Seeded, *flags: str) -> tuple[int, bytes, str]:
    """`replog consume TOPIC FLAGS | head -1`, through a real pipe to a real head."""
    consumer = subprocess.Popen(
        [*REPLOG, "consume", TOPIC, *flags, *seeded.native],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert consumer.stdout is not None and consumer.stderr is not None
    head = subprocess.Popen(["head", "-1"], stdin=consumer.stdout, stdout=subprocess.PIPE)
    consumer.stdout.close()
    try:
        first, _ = head.communicate(timeout=CLI_TIMEOUT_S)
        code = consumer.wait(timeout=CLI_TIMEOUT_S)
        said = consumer.stderr.read().decode()
    finally:
        consumer.kill()
        head.kill()
        consumer.stderr.close()
    return code, first, said


@pytest.mark.parametrize(
    ("flags", "first_line"),
    [
        (("--from-beginning",), b"record-0\n"),
        (("--from-beginning", "--format", "json"), b'"value": "record-0"'),
        # One record and then a quiet topic: nothing more is written, so only a reader
        # watched between polls ends it.
        (("--partition", "0", "--offset", str(RECORDS - 1)), b"record-%d\n" % (RECORDS - 1)),
    ],
    ids=["text", "json-lines", "quiet-topic"],
)
def test_consume_into_head_ends_quietly(
    seeded: Seeded, flags: tuple[str, ...], first_line: bytes
) -> None:
    code, first, said = consume_into_head(seeded, *flags)
    assert first_line in first
    assert code == 0, said
    assert "Traceback" not in said


def test_json_of_generate_is_one_document_and_output_writes_the_plan(seeded: Seeded) -> None:
    plan = seeded.scratch / "plan.json"
    generate = ["reassign", "--generate", "--brokers", "1", "--topics", TOPIC, *seeded.zookeeper]
    done = replog_in_process(*generate, "--json", "--output", str(plan))
    assert done.returncode == 0, done.stderr.decode()
    document = json.loads(done.stdout)
    proposed = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1]}]}
    assert document == {"current": proposed, "proposed": proposed}
    assert json.loads(plan.read_text()) == proposed

    refused = replog_in_process("reassign", "--status", "--output", str(plan), *seeded.zookeeper)
    assert refused.returncode == 2
    assert b"--output goes with --generate" in refused.stderr
