"""A stream processor keeps its state in a compacted changelog topic on replog's Kafka
listener, and gets it back from there after a restart that lost its local state.

The processor is a Faust application (tests/kafka/faust_counter.py), run as a subprocess
as a user runs one: it counts the records of each key of an input topic in a Table and
writes every new count to an output topic. Faust creates the Table's changelog topic
itself (CreateTopics with cleanup.policy=compact, one partition per input partition) and
reads its partition count from Metadata straight away. The broker's cleaner compacts
that changelog between the two runs, so the restore reads across the offsets it removed.

Records are produced only once the application is ready, after its start and its
restart alike: Faust loses records it fetched while it still restored its tables (they
are dropped with its queues when the restore ends, and its commits then stop at the
gap), on Kafka too. A restart that restores nothing would count from zero again; the
counts carrying on past the first round show the state came back from the changelog.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    KafkaRecord,
    consume,
    flush,
    kafka_consumer,
    kafka_producer,
    make_topic,
    produce_all,
)
from tests.support import BrokerFactory, module_brokers
from tests.support_compaction import CLEANER_BROKER_OVERRIDES

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2
KEYS = [f"key-{n}".encode() for n in range(10)]
FIRST_ROUND = 300
SECOND_ROUND = 200
# Faust's start (topics, group, restore) takes about 2 s here; a loaded machine more.
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
# The changelog rolls every few batches.
CHANGELOG_SEGMENT_BYTES = 8192
# Faust's own web server would take a fixed port; its "Ready" line is logged at info.
WORKER_ARGS = ("worker", "--without-web", "--loglevel", "info")
READY_LINE = b"[^Worker]: Ready"


@pytest.fixture(scope="module")
def kafka_broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("stream-processor"),
        **CLEANER_BROKER_OVERRIDES,
    ) as brokers:
        yield brokers


class CounterApp:
    """The Faust counter's settings, and its runs as subprocesses logging to files."""

    def __init__(self, bootstrap: str, root: Path) -> None:
        self.app_id = f"counter-{uuid.uuid4().hex[:8]}"
        self.input = f"{self.app_id}-records"
        self.output = f"{self.app_id}-counts"
        self.changelog = f"{self.app_id}-counts-changelog"
        self.state_dir = root / "state"
        self.root = root
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
            "COUNTER_APP_ID": self.app_id,
            "COUNTER_BOOTSTRAP": bootstrap,
            "COUNTER_DATADIR": str(self.state_dir),
            "COUNTER_INPUT": self.input,
            "COUNTER_OUTPUT": self.output,
            "COUNTER_PARTITIONS": str(PARTITIONS),
            "COUNTER_REPLICATION_FACTOR": "1",
            "COUNTER_CHANGELOG_SEGMENT_BYTES": str(CHANGELOG_SEGMENT_BYTES),
        }
        self.runs = 0

    @contextmanager
    def running(self) -> Iterator[subprocess.Popen[bytes]]:
        """A run of the application, yielded once Faust says it is ready (its tables
        restored), and stopped by its PID afterwards: SIGTERM, SIGKILL past a deadline."""
        self.runs += 1
        log_path = self.root / f"run-{self.runs}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.kafka.faust_counter", *WORKER_ARGS],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=REPO_ROOT,
            )
        try:
            wait_until_ready(process, log_path)
            yield process
        except AssertionError:
            self.expect_no_failure()
            raise
        finally:
            stop(process)

    def expect_no_failure(self) -> None:
        """No crashed agent in any run's log: Faust's supervisor restarts a crashed agent,
        so a crash shows otherwise only as counts that never come."""
        for log_path in sorted(self.root.glob("run-*.log")):
            text = log_path.read_text(errors="replace")
            assert "Crashed reason" not in text, f"{log_path.name}:\n{text[-4000:]}"


def wait_until_ready(process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while READY_LINE not in log_path.read_bytes():
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-4000:]
            raise AssertionError(f"the application exited {process.returncode}:\n{tail}")
        if time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-4000:]
            raise AssertionError(f"the application not ready in {READY_TIMEOUT_S} s:\n{tail}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)


def produce_round(bootstrap: str, topic: str, count: int) -> None:
    """`count` records, the keys taken in turn, acknowledged by every replica."""
    with kafka_producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
        for n in range(count):
            key = KEYS[n % len(KEYS)]
            produce_all(producer, lambda key=key, n=n: producer.produce(topic, b"%d" % n, key))
        flush(producer)


def counts_by_key(records: list[KafkaRecord]) -> dict[bytes, list[int]]:
    """Every count the application wrote for each key, in the order it wrote them (a
    key's counts all go to one partition)."""
    counts: dict[bytes, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        counts.setdefault(record.key, []).append(int(record.value))
    return counts


def read_counts(bootstrap: str, topic: str, per_key: int) -> dict[bytes, list[int]]:
    """The output topic from its start, once every key's last count is `per_key`."""

    def complete(records: list[KafkaRecord]) -> bool:
        counts = counts_by_key(records)
        return len(counts) == len(KEYS) and all(c[-1] >= per_key for c in counts.values())

    config = {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": False}
    with kafka_consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        return counts_by_key(consume(consumer, complete))


def wait_for_commits(bootstrap: str, group: str, topic: str) -> None:
    """Until the application's group has committed the end of every input partition: a
    restart then reads none of them again."""
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    with kafka_consumer(config) as consumer:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while [tp.offset for tp in consumer.committed(partitions, timeout=10)] != ends:
            assert time.monotonic() < deadline, f"group {group} has not committed {ends}"
            time.sleep(0.2)


def wait_until_compacted(bootstrap: str, topic: str, written: int) -> int:
    """Until the cleaner has been through the changelog (it keeps only each key's last
    record of the sealed segments: offsets go missing); how many of the `written` records
    are left. Each read goes to the end of every partition: the last record of a log is
    never cleaned away."""
    config = {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": False}
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        with kafka_consumer(config) as consumer:
            partitions = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
            ends = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
            assert sum(ends) == written, f"changelog ends at {ends}, {written} written"

            def at_end(records: list[KafkaRecord], ends: list[int] = ends) -> bool:
                last = {r.partition: r.offset for r in records}
                return all(last.get(p) == end - 1 for p, end in enumerate(ends))

            consumer.assign(partitions)
            left = len(consume(consumer, at_end))
        if left < written:
            return left
        assert time.monotonic() < deadline, f"changelog not compacted: {left} of {written} left"
        time.sleep(1.0)


def changelog_policy(bootstrap: str, topic: str) -> tuple[int, str]:
    """(partition count, cleanup.policy) of a topic, as the Kafka listener describes it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic=topic, timeout=10)
    (described,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    configs = described.result(CLIENT_TIMEOUT_S)
    return len(metadata.topics[topic].partitions), configs["cleanup.policy"].value


def test_table_state_comes_back_from_its_compacted_changelog(
    kafka_broker: BrokerFactory, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.kafka_bootstrap()
    app = CounterApp(bootstrap, tmp_path)
    for topic in (app.input, app.output):
        make_topic(kafka_broker, topic, PARTITIONS, rf=1)
    first_per_key = FIRST_ROUND // len(KEYS)
    total_per_key = (FIRST_ROUND + SECOND_ROUND) // len(KEYS)

    with app.running():
        produce_round(bootstrap, app.input, FIRST_ROUND)
        first = read_counts(bootstrap, app.output, first_per_key)
        assert first == {key: list(range(1, first_per_key + 1)) for key in KEYS}
        wait_for_commits(bootstrap, app.app_id, app.input)
    assert changelog_policy(bootstrap, app.changelog) == (PARTITIONS, "compact")
    # The restart then restores the counts across the gaps the cleaner left.
    wait_until_compacted(bootstrap, app.changelog, FIRST_ROUND)

    assert app.state_dir.is_dir(), "Faust keeps its local state there"
    shutil.rmtree(app.state_dir)
    with app.running():
        produce_round(bootstrap, app.input, SECOND_ROUND)
        counts = read_counts(bootstrap, app.output, total_per_key)
    # Each key counted on from where the first run left it: once per record, no count
    # lost, none repeated, none restarting from 1.
    assert counts == {key: list(range(1, total_per_key + 1)) for key in KEYS}
    app.expect_no_failure()
