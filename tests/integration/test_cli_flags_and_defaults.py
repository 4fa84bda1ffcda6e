"""One meaning per flag and the cluster's defaults, through the real command line.

Kafka's flags where Kafka's tools have them (--topic, --max-messages, --property), a
subcommand's own usage on a mistake, the same exit code for the same kind of mistake
in every command, and counts that read as English. One cluster of two brokers for the
module, with num.partitions and default.replication.factor that are not Kafka's 1.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from spark_replica.reassignment import PartitionMove, plan_to_json
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, replog, replog_in_process, wait_until

pytestmark = pytest.mark.slow

DEFAULT_PARTITIONS = 3
DEFAULT_REPLICATION_FACTOR = 2


@dataclass(frozen=True)
class Flags:
    native: list[str]
    kafka: list[str]
    zookeeper: list[str]
    factory: BrokerFactory


@pytest.fixture(scope="module")
def cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flags]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("cli-flags"),
    )
    defaults = {
        "num.partitions": str(DEFAULT_PARTITIONS),
        "default.replication.factor": str(DEFAULT_REPLICATION_FACTOR),
    }
    try:
        for broker_id in (1, 2):
            factory.start(broker_id, **defaults)
        yield Flags(
            native=["--bootstrap-server", ",".join(f"{h}:{p}" for h, p in factory.bootstrap)],
            kafka=["--bootstrap-server", factory.kafka_bootstrap()],
            zookeeper=["--zookeeper", factory.zk_connect],
            factory=factory,
        )
    finally:
        factory.stop_all()


def ok(*args: str) -> str:
    done = replog_in_process(*args)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_kafka_flags_name_the_topic_and_shape_lines(cluster: Flags) -> None:
    ok("topics", "create", "--topic", "flagged", "--partitions", "1", "--replication-factor",
       "1", *cluster.native)  # fmt: skip
    (described,) = json.loads(ok("topics", "describe", "--topic", "flagged", "--json",
                                 *cluster.native))  # fmt: skip
    assert described["topic"] == "flagged" and len(described["partitions"]) == 1
    assert json.loads(ok("configs", "describe", "flagged", "--json", *cluster.zookeeper)) == {
        "topic": "flagged",
        "config": {},
    }
    assert ok("configs", "describe", "--topic", "flagged", *cluster.zookeeper) == (
        "Topic flagged has no config overrides: the brokers' defaults apply.\n"
    )

    produced = replog("produce", "--topic", "flagged", "--property", "parse.key=true",
                      *cluster.native, stdin=b"k1\tv1\n")  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()
    assert b"1 record acknowledged." in produced.stderr
    consumed = replog_in_process(
        "consume", "--topic", "flagged", "--from-beginning", "--max-messages", "1",
        "--property", "print.key=true", *cluster.native,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout == b"k1\tv1\n"
    assert b"Processed a total of 1 record." in consumed.stderr

    twice = replog_in_process("topics", "delete", "flagged", "--topic", "other", *cluster.native)
    assert twice.returncode == 2
    assert b"two topics given" in twice.stderr


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (("topics", "create", "t", "--bogus"), "usage: replog topics create"),
        (("topics", "create"), "usage: replog topics create"),
        (("consume", "t", "--group"), "usage: replog consume"),
        (("configs", "describe"), "usage: replog configs describe"),
    ],
)
def test_a_mistake_shows_the_usage_of_its_subcommand(args: tuple[str, ...], usage: str) -> None:
    done = replog_in_process(*args)
    assert done.returncode == 2
    assert done.stderr.decode().startswith(usage), done.stderr.decode()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        # a bad config value is bad input whether the CLI or the broker finds it
        (("topics", "create", "bad-value", "--config", "retention.ms=abc"), 2, "not an integer"),
        (("configs", "alter", "--topic", "x", "--add-config", "retention.ms=abc"), 2,
         "not an integer"),
        (("topics", "create", "no-partitions", "--partitions", "0"), 2, "partitions"),
        (("topics", "create", "bad name"), 2, "characters"),
        (("topics", "delete", "never-made"), 1, "does not exist"),
    ],
)  # fmt: skip
def test_exit_codes_mean_the_same_in_every_command(
    cluster: Flags, args: tuple[str, ...], code: int, message: str
) -> None:
    where = cluster.zookeeper if args[0] == "configs" else cluster.native
    done = replog_in_process(*args, *where)
    assert done.returncode == code, done.stderr.decode()
    (line,) = done.stderr.decode().splitlines()
    assert message in line


def test_elect_leaders_says_which_partitions_moved(cluster: Flags, tmp_path) -> None:
    ok("topics", "create", "swapped", "--partitions", "1", "--replication-factor", "2",
       *cluster.native)  # fmt: skip
    (described,) = json.loads(ok("topics", "describe", "swapped", "--json", *cluster.native))
    (partition,) = described["partitions"]
    leader = partition["leader"]
    other = next(r for r in partition["replicas"] if r != leader)
    # The same replicas in the other order: the preferred replica is now the follower.
    plan = tmp_path / "plan.json"
    plan.write_text(plan_to_json([PartitionMove(TopicPartition("swapped", 0), (other, leader))]))
    ok("reassign", "--plan", str(plan), *cluster.zookeeper)

    def reordered() -> bool:
        (now,) = json.loads(ok("topics", "describe", "swapped", "--json", *cluster.native))
        return now["partitions"][0]["replicas"] == [other, leader]

    wait_until(reordered, "the reassignment to reorder the replicas", timeout_s=30)
    wait_until(lambda: "done" in ok("reassign", "--status", "--plan", str(plan),
                                    *cluster.zookeeper), "the reassignment to finish")  # fmt: skip
    printed = ok("elect-leaders", "--topic", "swapped", *cluster.zookeeper)
    assert f"moved {leader} -> {other}" in printed
    assert "leadership of 1 partition moved." in printed


# --------------------------------------------------------------------------- the cluster's defaults


def test_topics_create_without_flags_takes_the_brokers_defaults(cluster: Flags) -> None:
    created = ok("topics", "create", "defaulted", *cluster.native)
    assert "3 partitions, replication factor 2" in created
    (described,) = json.loads(ok("topics", "describe", "defaulted", "--json", *cluster.native))
    assert len(described["partitions"]) == DEFAULT_PARTITIONS
    assert {len(p["replicas"]) for p in described["partitions"]} == {DEFAULT_REPLICATION_FACTOR}


def test_min_insync_above_the_replication_factor_is_refused_at_create_and_alter(
    cluster: Flags,
) -> None:
    refused = replog_in_process(
        "topics", "create", "unwritable", "--replication-factor", "1",
        "--config", "min.insync.replicas=2", *cluster.native,
    )  # fmt: skip
    assert refused.returncode == 2
    (line,) = refused.stderr.decode().splitlines()
    assert "min.insync.replicas=2 is above its replication factor 1" in line
    assert "unwritable" not in ok("topics", "list", *cluster.native)

    ok("topics", "create", "pair", "--partitions", "1", *cluster.native)
    altered = replog_in_process(
        "configs", "alter", "pair", "--add-config", "min.insync.replicas=3", *cluster.zookeeper
    )
    assert altered.returncode == 2
    (line,) = altered.stderr.decode().splitlines()
    assert "min.insync.replicas=3 is above its replication factor 2" in line
    assert json.loads(ok("configs", "describe", "pair", "--json", *cluster.zookeeper)) == {
        "topic": "pair",
        "config": {},
    }


def test_a_producer_facing_an_impossible_min_insync_fails_at_once(cluster: Flags) -> None:
    """A topic whose min.insync.replicas was raised past its replicas behind the CLI's
    back (as an older version allowed): acks=all can never succeed, and the producer
    says so at once instead of after its two-minute delivery timeout."""
    ok("topics", "create", "stuck", "--partitions", "1", "--replication-factor", "1",
       *cluster.native)  # fmt: skip
    zk = connect(cluster.factory.zk_connect)
    try:
        topic_store.alter_topic_config(zk, "stuck", {"min.insync.replicas": "2"}, [])
    finally:
        zk.stop()
        zk.close()

    def refused() -> bool:
        produced = replog("produce", "stuck", *cluster.native, stdin=b"a\nb\nc\n", timeout_s=30)
        return produced.returncode == 1 and b"above its replication factor 1" in produced.stderr

    # the brokers learn the new config through ZooKeeper: until then acks=all succeeds
    wait_until(refused, "the producer to be refused", timeout_s=60)
    produced = replog("produce", "stuck", *cluster.native, stdin=b"a\nb\nc\n", timeout_s=30)
    not_sent = [line for line in produced.stderr.decode().splitlines() if "not sent" in line]
    assert len(not_sent) == 1, produced.stderr.decode()
    assert "0 records acknowledged. 3 failed" in produced.stderr.decode()


# --------------------------------------------------------------------------- either listener


@pytest.mark.parametrize(
    ("args", "listener", "key"),
    [
        (("topics", "list"), "kafka", "bootstrap"),
        (("consume", "anything", "--max-messages", "1"), "kafka", "bootstrap"),
        (("groups", "list"), "native", "kafka-bootstrap"),
    ],
)
def test_the_other_listeners_address_is_named_in_one_line(
    cluster: Flags, args: tuple[str, ...], listener: str, key: str
) -> None:
    wrong = cluster.kafka if listener == "kafka" else cluster.native
    done = replog_in_process(*args, *wrong)
    assert done.returncode == 2
    (line,) = done.stderr.decode().splitlines()
    assert f"`replog status --get {key}`" in line


# --------------------------------------------------------------------------- -v


def test_verbose_shows_the_brokers_asked_each_request_and_answer_and_the_retries(
    cluster: Flags,
) -> None:
    described = replog("-v", "topics", "describe", "--json", *cluster.native)
    assert described.returncode == 0, described.stderr.decode()
    said = described.stderr.decode()
    assert re.search(r"connected to 127\.0\.0\.1:\d+ \(replog listener\)", said), said
    assert re.search(r"127\.0\.0\.1:\d+ METADATA v0 #\d+ -> ok \(\d+\.\d ms\)", said), said
    json.loads(described.stdout)  # the log stays on standard error

    listed = replog("-v", "groups", "list", *cluster.kafka)
    assert listed.returncode == 0, listed.stderr.decode()
    assert re.search(r"\(Kafka listener\)", listed.stderr.decode())
    assert re.search(r"LIST_GROUPS v\d+ #\d+ -> ok", listed.stderr.decode())

    missing = replog("-v", "consume", "never-created", "--max-messages", "1", *cluster.native)
    assert missing.returncode == 1
    said = missing.stderr.decode()
    assert "retry 1 in " in said and "after UnknownTopicOrPartitionError" in said, said
    assert "giving up after" in said

    quiet = replog("topics", "describe", "--json", *cluster.native)
    assert quiet.stderr == b""


def test_consume_with_a_group_starts_where_it_committed(cluster: Flags) -> None:
    ok("topics", "create", "grouped", "--partitions", "1", *cluster.native)
    produced = replog("produce", "grouped", *cluster.native, stdin=b"a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr.decode()
    first = ("consume", "--topic", "grouped", "--group", "readers", *cluster.zookeeper)
    assert ok(*first, "--from-beginning", "--max-messages", "2") == "a\nb\n"
    assert ok(*first, "--max-messages", "1") == "c\n"
    described = json.loads(ok("groups", "describe", "readers", "--json", *cluster.kafka))
    assert [(p["partition"], p["current_offset"]) for p in described["partitions"]] == [(0, 3)]

    refused = replog_in_process("consume", "grouped", "--group", "readers", *cluster.native)
    assert refused.returncode == 2
    assert b"pass --zookeeper or --dir" in refused.stderr
