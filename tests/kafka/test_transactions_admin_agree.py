"""`replog transactions list|describe` against Kafka's admin API for transactions.

kafka-python's KafkaAdminClient speaks ListTransactions and DescribeTransactions as
Kafka's own admin client does (each broker lists the ids it coordinates; each id is
described by the coordinator FindCoordinator names). On one three-broker cluster,
confluent-kafka transactional producers leave transactions in every state an operator
meets: two open (Ongoing, on several partitions, coordinated by two different brokers),
one committed, one aborted, one initialised and never begun (Empty). The real CLI, run as
a subprocess with `--json`, and kafka-python must then name the same ids, coordinators,
states, producer ids and epochs, timeouts, start times and partitions, and filter by
state, by producer id and by duration (kafka-transactions' `--duration-filter`) alike; an
unknown id is not found by either.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError

from spark_replica.topics import TRANSACTION_STATE_TOPIC, transaction_partition_for
from tests.kafka.clients import CLIENT_TIMEOUT_S, make_topic
from tests.support import (
    FAST_REPLICATION,
    BrokerFactory,
    eventually,
    leadership,
    module_brokers,
    replog,
    run,
)

pytestmark = pytest.mark.slow

# Few partitions keep `__transaction_state`'s creation quick; still more than brokers, so
# ids fall to different coordinators.
TRANSACTION_PARTITIONS = 5
TOPIC_PARTITIONS = 4
# Distinct timeouts per id, so that a mix-up between ids shows; all far longer than the
# module, so the open transactions stay open.
TIMEOUT_MS = {
    "ongoing-a": 300_000,
    "ongoing-b": 310_000,
    "committed": 320_000,
    "aborted": 330_000,
}
EMPTY_TIMEOUT_MS = 340_000
NO_START_TIME = -1
ONGOING = ("ongoing-a", "ongoing-b")
LONGER_THAN_THE_MODULE_MS = 600_000


@dataclass(frozen=True)
class Opened:
    """The transactional ids the module left, by what was done with them."""

    topic: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("transactions-admin"),
        3,
        **FAST_REPLICATION,
        **{"transaction.state.log.num.partitions": str(TRANSACTION_PARTITIONS)},
    ) as brokers:
        yield brokers


def transactional_producer(
    cluster: BrokerFactory, transactional_id: str, timeout_ms: int
) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
        }
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    return producer


def send(producer: Producer, topic: str, partitions: list[int]) -> None:
    producer.begin_transaction()
    for partition in partitions:
        producer.produce(topic, f"to-{partition}".encode(), partition=partition)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0


def ids_on_two_coordinators(cluster: BrokerFactory, prefix: str) -> tuple[str, str]:
    """Two transactional ids whose `__transaction_state` partitions two different brokers
    lead (the topic exists once a first transactional producer has initialised)."""

    def led() -> list[object] | None:
        partitions = run(leadership(cluster.bootstrap, TRANSACTION_STATE_TOPIC))
        leaders = [p["leader"] for p in partitions]
        return leaders if all(isinstance(id_, int) and id_ >= 0 for id_ in leaders) else None

    leaders = eventually(led, f"every partition of {TRANSACTION_STATE_TOPIC} has a leader")
    assert len(set(leaders)) >= 2, f"one broker leads all of {TRANSACTION_STATE_TOPIC}: {leaders}"
    by_leader: dict[object, str] = {}
    for n in range(1_000):
        candidate = f"{prefix}-{n}"
        leader = leaders[transaction_partition_for(candidate, TRANSACTION_PARTITIONS)]
        by_leader.setdefault(leader, candidate)
        if len(by_leader) == 2:
            first, second = by_leader.values()
            return first, second
    raise AssertionError(f"no two ids of {prefix} on different coordinators")


@pytest.fixture(scope="module")
def opened(cluster: BrokerFactory) -> Iterator[Opened]:
    suffix = uuid.uuid4().hex[:8]
    topic = f"admin-agree-{suffix}"
    make_topic(cluster, topic, TOPIC_PARTITIONS)
    ids = {name: f"{name}-{suffix}" for name in ("committed", "aborted", "empty")}
    producers = []
    try:
        committed = transactional_producer(cluster, ids["committed"], TIMEOUT_MS["committed"])
        producers.append(committed)
        send(committed, topic, list(range(TOPIC_PARTITIONS)))
        committed.commit_transaction(CLIENT_TIMEOUT_S)

        aborted = transactional_producer(cluster, ids["aborted"], TIMEOUT_MS["aborted"])
        producers.append(aborted)
        send(aborted, topic, [0, 1])
        aborted.abort_transaction(CLIENT_TIMEOUT_S)

        producers.append(transactional_producer(cluster, ids["empty"], EMPTY_TIMEOUT_MS))

        ids["ongoing-a"], ids["ongoing-b"] = ids_on_two_coordinators(cluster, f"open-{suffix}")
        for name, partitions in (("ongoing-a", [0, 2]), ("ongoing-b", [1, 2, 3])):
            producer = transactional_producer(cluster, ids[name], TIMEOUT_MS[name])
            producers.append(producer)
            send(producer, topic, partitions)
        yield Opened(topic, ids)
    finally:
        for producer in producers:
            producer.purge()
            producer.close()


@pytest.fixture(scope="module")
def kafka_admin(cluster: BrokerFactory) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(),
        request_timeout_ms=int(CLIENT_TIMEOUT_S * 1000),
    )
    try:
        yield admin
    finally:
        admin.close()


def transactions_cli(cluster: BrokerFactory, *args: str) -> Any:
    done = replog("transactions", *args, "--bootstrap-server", cluster.kafka_bootstrap(), "--json")
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


Listing = list[tuple[str, int, int, str]]


def cli_listing(cluster: BrokerFactory, *filters: str) -> Listing:
    """(id, coordinator, producer id, state) of each id `replog transactions list` shows,
    sorted (an id listed twice shows)."""
    return sorted(
        (listed["transactional_id"], listed["coordinator"], listed["producer_id"], listed["state"])
        for listed in transactions_cli(cluster, "list", *filters)
    )


def kafka_listing(listed: dict[int, list[Any]]) -> Listing:
    """The same of kafka-python's list_transactions(): listings by the broker that listed
    them, which is the id's coordinator."""
    return sorted(
        (listing.transactional_id, broker, listing.producer_id, listing.state.value)
        for broker, listings in listed.items()
        for listing in listings
    )


def cli_description(cluster: BrokerFactory, transactional_id: str) -> dict[str, Any]:
    described = transactions_cli(cluster, "describe", "--transactional-id", transactional_id)
    return {
        "coordinator": described["coordinator"],
        "state": described["state"],
        "producer": (described["producer_id"], described["producer_epoch"]),
        "timeout_ms": described["timeout_ms"],
        "start_time_ms": described["start_time_ms"],
        "partitions": sorted((tp["topic"], tp["partition"]) for tp in described["partitions"]),
    }


def kafka_description(described: Any) -> dict[str, Any]:
    """kafka-python's TransactionDescription in the CLI's terms (no start time: null)."""
    started = described.transaction_start_time_ms
    return {
        "coordinator": described.coordinator_id,
        "state": described.state.value,
        "producer": (described.producer_id, described.producer_epoch),
        "timeout_ms": described.transaction_timeout_ms,
        "start_time_ms": None if started == NO_START_TIME else started,
        "partitions": sorted((tp.topic, tp.partition) for tp in described.topic_partitions),
    }


EXPECTED_STATES = {
    "ongoing-a": "Ongoing",
    "ongoing-b": "Ongoing",
    "committed": "CompleteCommit",
    "aborted": "CompleteAbort",
    "empty": "Empty",
}


def settled(kafka_admin: KafkaAdminClient, opened: Opened) -> dict[str, Any]:
    """kafka-python's descriptions once the committed and aborted transactions have
    completed (their markers written): from then on nothing changes in the module."""

    def described() -> dict[str, Any] | None:
        found = kafka_admin.describe_transactions(list(opened.ids.values()))
        states = {name: found[tid].state.value for name, tid in opened.ids.items()}
        return found if states == EXPECTED_STATES else None

    return eventually(described, "the committed and aborted transactions complete")


def test_list_and_describe_agree_with_kafkas_admin_api(
    cluster: BrokerFactory, opened: Opened, kafka_admin: KafkaAdminClient
) -> None:
    described = settled(kafka_admin, opened)
    listed = kafka_listing(kafka_admin.list_transactions())
    assert cli_listing(cluster) == listed
    assert [tid for tid, *_ in listed] == sorted(opened.ids.values())

    by_kafka = {tid: kafka_description(described[tid]) for tid in opened.ids.values()}
    by_cli = {tid: cli_description(cluster, tid) for tid in opened.ids.values()}
    assert by_cli == by_kafka
    coordinators = {tid: coordinator for tid, coordinator, *_ in listed}
    assert {tid: d["coordinator"] for tid, d in by_cli.items()} == coordinators
    open_coordinators = {by_cli[opened.ids[name]]["coordinator"] for name in ONGOING}
    assert len(open_coordinators) == 2, open_coordinators

    topic = opened.topic
    expected = {
        "ongoing-a": ([(topic, 0), (topic, 2)], TIMEOUT_MS["ongoing-a"]),
        "ongoing-b": ([(topic, 1), (topic, 2), (topic, 3)], TIMEOUT_MS["ongoing-b"]),
        "committed": ([], TIMEOUT_MS["committed"]),
        "aborted": ([], TIMEOUT_MS["aborted"]),
        "empty": ([], EMPTY_TIMEOUT_MS),
    }
    assert {
        name: (by_cli[tid]["partitions"], by_cli[tid]["timeout_ms"])
        for name, tid in opened.ids.items()
    } == expected
    assert by_cli[opened.ids["empty"]]["start_time_ms"] is None
    assert all(by_cli[tid]["producer"][1] == 0 for tid in opened.ids.values())


def test_an_unknown_id_is_not_found_by_either(
    cluster: BrokerFactory, opened: Opened, kafka_admin: KafkaAdminClient
) -> None:
    unknown = f"never-used-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TransactionalIdNotFoundError):
        kafka_admin.describe_transactions([unknown])
    done = replog(
        "transactions", "describe", "--transactional-id", unknown,
        "--bootstrap-server", cluster.kafka_bootstrap(),
    )  # fmt: skip
    message = done.stderr.decode().strip()
    assert done.returncode == 1  # an operation that failed, as for a topic that does not exist
    assert message == (
        f"replog: transactional id {unknown!r}: "
        "The coordinator holds no state for that transactional id."
    )


def test_the_state_and_producer_id_filters_agree(
    cluster: BrokerFactory, opened: Opened, kafka_admin: KafkaAdminClient
) -> None:
    settled(kafka_admin, opened)
    ongoing = kafka_listing(kafka_admin.list_transactions(state_filters=["Ongoing"]))
    assert cli_listing(cluster, "--state", "Ongoing") == ongoing
    assert {tid for tid, *_ in ongoing} == {opened.ids[name] for name in ONGOING}

    ended = ["CompleteCommit", "CompleteAbort"]
    by_state = kafka_listing(kafka_admin.list_transactions(state_filters=ended))
    assert cli_listing(cluster, "--state", ended[0], "--state", ended[1]) == by_state
    assert {tid for tid, *_ in by_state} == {opened.ids["committed"], opened.ids["aborted"]}

    producers = sorted(pid for tid, _, pid, _ in by_state)
    by_producer = kafka_listing(kafka_admin.list_transactions(producer_id_filters=producers))
    filters = [arg for pid in producers for arg in ("--producer-id", str(pid))]
    assert cli_listing(cluster, *filters) == by_producer == by_state


def test_the_duration_filter_agrees(
    cluster: BrokerFactory, opened: Opened, kafka_admin: KafkaAdminClient
) -> None:
    """kafka-transactions' `--duration-filter` (ListTransactions v1): the open
    transactions have run longer than nothing, and not longer than the module's bound."""
    settled(kafka_admin, opened)
    open_ids = {opened.ids[name] for name in ONGOING}
    for duration_ms, expected in ((0, open_ids), (LONGER_THAN_THE_MODULE_MS, set())):
        listed = kafka_listing(
            kafka_admin.list_transactions(state_filters=["Ongoing"], duration_filter_ms=duration_ms)
        )
        by_cli = cli_listing(cluster, "--state", "Ongoing", "--duration-filter", str(duration_ms))
        assert by_cli == listed
        assert {tid for tid, *_ in listed} == expected
