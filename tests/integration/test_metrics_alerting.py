"""The metrics operators alert on, scraped from a real 2-broker cluster after Kafka
clients produced and a consumer group committed: errors per API and error code (counted
once, whichever listener answered), the process collector, replica fetcher lag, and
consumer-group lag on the group's coordinator; and that the sample alert rules and
Grafana dashboard in docs/monitoring/ name only metrics the brokers serve."""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import UnknownTopicOrPartitionError
from spark_replica.records import build_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.kafka.clients import flush, kafka_consumer, kafka_producer, wait_for_topic
from tests.support import (
    BrokerFactory,
    create,
    eventually,
    leadership,
    read_everything,
    run,
    start_cluster,
)

pytestmark = pytest.mark.slow

T = TypeVar("T")
TOPIC = "orders"
GROUP = "audit"
PRODUCED = {0: 20, 1: 10}  # partition -> records
COMMITTED = {0: 5, 1: 10}  # partition -> the group's committed offset
# Not replicated: each broker hosts one of its partitions, so the coordinator must ask
# the other broker for the high watermark of one.
LEDGER = "ledger"
LEDGER_PRODUCED = {0: 8, 1: 8}
LEDGER_COMMITTED = {0: 3, 1: 6}
ERRORS = "kafka_network_requestmetrics_errors_total"
MONITORING = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
# A metric name in PromQL: the brokers' own (Kafka's and kafka-exporter's names, the
# process collector's), or `up`, which Prometheus makes for every scrape target.
METRIC_NAME = re.compile(r"\b(?:kafka|process)_[a-z0-9_]+\b|\bup(?=\{)")
MADE_BY_PROMETHEUS = {"up"}
RULE_START = re.compile(r"^      - alert: [A-Z][A-Za-z]+$")
RULE_EXPR = re.compile(r"^        expr: (?P<expr>[^|>].*)$")
RULE_FOR = re.compile(r"^        for: [0-9]+[smh]$")


@pytest.fixture(scope="module")
def cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """Two brokers, a topic replicated on both, records produced and a group's commits,
    all through the Kafka listener by a Kafka client."""
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("metrics-alerting"),
    )
    try:
        start_cluster(factory, count=2)
        run(create(factory.bootstrap, TOPIC, partitions=2, rf=2))
        run(create(factory.bootstrap, LEDGER, partitions=2, rf=1))
        kafka = factory.kafka_bootstrap()
        wait_for_topic(kafka, TOPIC, len(PRODUCED))
        wait_for_topic(kafka, LEDGER, len(LEDGER_PRODUCED))
        with kafka_producer({"bootstrap.servers": kafka, "linger.ms": 0}) as producer:
            for topic, produced in ((TOPIC, PRODUCED), (LEDGER, LEDGER_PRODUCED)):
                for partition, count in produced.items():
                    for i in range(count):
                        producer.produce(topic, value=f"r{i}".encode(), partition=partition)
            flush(producer)
        run(read_everything(factory.bootstrap, TOPIC, sum(PRODUCED.values())))
        consumer_config = {"bootstrap.servers": kafka, "group.id": GROUP}
        with kafka_consumer(consumer_config) as consumer:
            commits = [
                KafkaTopicPartition(topic, p, o)
                for topic, committed in ((TOPIC, COMMITTED), (LEDGER, LEDGER_COMMITTED))
                for p, o in committed.items()
            ]
            consumer.commit(offsets=commits, asynchronous=False)
        yield factory
    finally:
        factory.stop_all()


def scrape(broker: BrokerProcess) -> list[Sample]:
    assert broker.metrics_url is not None
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        text = response.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def scrape_all(cluster: BrokerFactory) -> dict[int, list[Sample]]:
    return {broker_id: scrape(b) for broker_id, b in cluster.brokers.items()}


def values(samples: list[Sample], name: str, **labels: str) -> list[float]:
    """The values of the samples named `name` whose labels include these."""
    return [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]


def errors_total(cluster: BrokerFactory, request: str, error: str) -> float:
    return sum(
        sum(values(samples, ERRORS, request=request, error=error))
        for samples in scrape_all(cluster).values()
    )


async def produce_to_missing_partition(broker: BrokerProcess) -> int:
    """A native produce to a partition the topic does not have: its error code."""
    connection = BrokerConnection(broker.host, broker.port)
    await connection.connect()
    try:
        partition = ProducePartition(len(PRODUCED) + 5, build_batch(["lost"]))
        request = ProduceRequest(1, 10_000, [ProduceTopic(TOPIC, [partition])])
        response = await connection.send(request)
    finally:
        await connection.close()
    return int(response.topics[0].partitions[0].error_code)


def test_errors_are_counted_once_per_api_and_error_whichever_listener_answers(
    cluster: BrokerFactory,
) -> None:
    produce_before = errors_total(cluster, "Produce", "UNKNOWN_TOPIC_OR_PARTITION")
    create_before = errors_total(cluster, "CreateTopics", "TOPIC_ALREADY_EXISTS")

    code = run(produce_to_missing_partition(cluster.brokers[1]))
    assert code == UnknownTopicOrPartitionError.code
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap()})
    created = admin.create_topics([NewTopic(TOPIC, 2, 2)], request_timeout=20)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        created[TOPIC].result(timeout=30)

    assert errors_total(cluster, "Produce", "UNKNOWN_TOPIC_OR_PARTITION") == produce_before + 1
    assert errors_total(cluster, "CreateTopics", "TOPIC_ALREADY_EXISTS") == create_before + 1


def test_each_broker_serves_the_standard_process_metrics(cluster: BrokerFactory) -> None:
    for broker_id, samples in scrape_all(cluster).items():
        served = {s.name: s.value for s in samples if s.name.startswith("process_")}
        assert served["process_cpu_seconds_total"] > 0, broker_id
        assert served["process_resident_memory_bytes"] > 1_000_000, broker_id
        assert 0 < served["process_open_fds"] < served["process_max_fds"], broker_id
        assert time.time() - 600 < served["process_start_time_seconds"] <= time.time()


def test_followers_report_their_lag_behind_each_leader(cluster: BrokerFactory) -> None:
    placement = {
        int(str(p["partition"])): int(str(p["leader"]))
        for p in run(leadership(cluster.bootstrap, TOPIC))
    }

    def caught_up() -> bool:
        scraped = scrape_all(cluster)
        for partition, leader in placement.items():
            labels = {"topic": TOPIC, "partition": str(partition)}
            for broker_id, samples in scraped.items():
                lag = values(samples, "kafka_server_fetcherlagmetrics_consumerlag", **labels)
                if broker_id == leader and lag:
                    raise AssertionError(f"leader {leader} reports a fetcher lag: {lag}")
                if broker_id != leader and lag != [0.0]:
                    return False
        return all(
            values(samples, "kafka_server_replicafetchermanager_maxlag") == [0.0]
            for samples in scraped.values()
        )

    eventually(caught_up, "every follower serving a lag of 0 for what it follows")


def test_the_coordinator_serves_the_groups_offsets_and_lag(cluster: BrokerFactory) -> None:
    expected_lag = {p: PRODUCED[p] - o for p, o in COMMITTED.items()}

    def coordinators() -> dict[int, list[Sample]] | None:
        """The brokers serving the group's offsets, once one serves every lag expected
        (a follower's high watermark follows its leader's a fetch later)."""
        serving = {
            broker_id: samples
            for broker_id, samples in scrape_all(cluster).items()
            if values(samples, "kafka_consumergroup_current_offset", consumergroup=GROUP)
        }
        for samples in serving.values():
            for partition, lag in expected_lag.items():
                labels = {"consumergroup": GROUP, "topic": TOPIC, "partition": str(partition)}
                if values(samples, "kafka_consumergroup_lag", **labels) != [lag]:
                    return None
        return serving or None

    serving = eventually(coordinators, "the coordinator serving the group's lag")
    assert len(serving) == 1, f"more than one broker serves group {GROUP}: {sorted(serving)}"
    samples = next(iter(serving.values()))
    for partition, offset in COMMITTED.items():
        labels = {"consumergroup": GROUP, "topic": TOPIC, "partition": str(partition)}
        assert values(samples, "kafka_consumergroup_current_offset", **labels) == [offset]
    lag_sum = values(samples, "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC)
    assert lag_sum == [sum(expected_lag.values())]


def test_the_coordinator_asks_leaders_for_what_it_hosts_no_replica_of(
    cluster: BrokerFactory,
) -> None:
    expected_lag = {p: LEDGER_PRODUCED[p] - o for p, o in LEDGER_COMMITTED.items()}

    def hosted_by_coordinator() -> set[str] | None:
        """The ledger partitions the coordinator hosts, once it serves every lag."""
        for samples in scrape_all(cluster).values():
            group = {"consumergroup": GROUP, "topic": LEDGER}
            if not values(samples, "kafka_consumergroup_current_offset", **group):
                continue
            for partition, lag in expected_lag.items():
                served = values(
                    samples, "kafka_consumergroup_lag", **group, partition=str(partition)
                )
                if served != [lag]:
                    return None
            return {
                s.labels["partition"]
                for s in samples
                if s.name == "kafka_log_log_logendoffset" and s.labels["topic"] == LEDGER
            }
        return None

    hosted = eventually(hosted_by_coordinator, "the coordinator serving the ledger's lag")
    assert len(hosted) == 1, f"the coordinator hosts ledger partitions {sorted(hosted)}"


def alert_expressions(text: str) -> dict[str, str]:
    """Each rule's name and expression, from a rules file in the shape alerts.yml keeps
    (a strict reading of that shape: no YAML library is needed, and a rule written
    otherwise fails here rather than being skipped)."""
    lines = text.splitlines()
    assert "groups:" in lines
    starts = [i for i, line in enumerate(lines) if RULE_START.match(line)]
    assert starts, "no rules"
    rules = {}
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        body = lines[start + 1 : end]
        expressions = [m["expr"] for line in body if (m := RULE_EXPR.match(line))]
        assert len(expressions) == 1, lines[start]
        assert sum(bool(RULE_FOR.match(line)) for line in body) == 1, lines[start]
        assert not any(
            line.lstrip().startswith("expr:") and not RULE_EXPR.match(line) for line in body
        )
        name = lines[start].split(": ", 1)[1]
        assert name not in rules, f"{name} twice"
        rules[name] = expressions[0]
    return rules


def dashboard_expressions(node: Any) -> list[str]:
    """Every `expr` of a Grafana dashboard's targets, wherever its panels nest them."""
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for value in node.values() for e in dashboard_expressions(value)]
    if isinstance(node, list):
        return [e for value in node for e in dashboard_expressions(value)]
    return []


def test_the_sample_alerts_and_dashboard_name_only_served_metrics(
    cluster: BrokerFactory,
) -> None:
    rules = alert_expressions((MONITORING / "alerts.yml").read_text())
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        if panel["type"] == "timeseries":  # every chart says what its axis counts
            defaults = panel["fieldConfig"]["defaults"]
            assert defaults["unit"] and defaults["custom"]["axisLabel"], panel["title"]
    expressions = [*rules.values(), *dashboard_expressions(dashboard)]
    named = {}
    for expression in expressions:
        names = set(METRIC_NAME.findall(expression))
        assert names, f"names no metric: {expression}"
        named.update(dict.fromkeys(names, expression))

    def missing() -> dict[str, str]:
        served = {s.name for samples in scrape_all(cluster).values() for s in samples}
        return {n: e for n, e in named.items() if n not in served | MADE_BY_PROMETHEUS}

    # Consumer-group series appear once the coordinator has the group's commits.
    deadline = time.monotonic() + 30
    while (absent := missing()) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not absent, f"named but not served (metric: where): {absent}"
