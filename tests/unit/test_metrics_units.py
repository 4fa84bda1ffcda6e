"""The metrics' pure parts: health rules, counters and their labels, the HTTP edge, the
scrape-time collector over a replica manager with no processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from brokerd.broker_gauges import BrokerStateCollector
from brokerd.config.broker import BrokerConfig
from brokerd.metrics import REPLOG_LISTENER, BrokerMetrics, MetricsServer
from brokerd.metrics.api_names import UNKNOWN_API, api_name
from brokerd.metrics.health import cluster_health, isr_change, leader_health
from brokerd.metrics.http_server import MAX_REQUEST_BYTES, answer_for
from brokerd.native.registry import VERSIONS as NATIVE_VERSIONS
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.http_head import RequestLine, parse_request_line
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.versions import SERVED
from spark_replica.wire.native.controller_requests import PartitionLeaderState
from spark_replica.zk import znodes

TP0, TP1, TP2 = (TopicPartition("t", p) for p in range(3))


def test_leader_health_compares_the_isr_with_replicas_and_min_isr() -> None:
    assert leader_health(3, 3, 2) == leader_health(3, 3, 1)
    assert not leader_health(3, 3, 2).under_replicated
    assert leader_health(2, 3, 2).under_replicated and not leader_health(2, 3, 2).under_min_isr
    assert leader_health(1, 3, 2).under_min_isr


def test_cluster_health_counts_offline_and_imbalanced_partitions() -> None:
    assignments = {TP0: [1, 2, 3], TP1: [2, 3, 1], TP2: [3, 1, 2], TopicPartition("u", 0): [3]}
    leaders = {TP0: 1, TP1: 3, TP2: -1}  # u-0 has no state yet: new, not offline
    health = cluster_health(assignments, leaders, live_brokers={1, 2, 3})
    assert (health.topics, health.partitions) == (2, 4)
    assert health.offline == 1  # no leader
    assert health.preferred_imbalance == 2  # t-1 led by 3, t-2 by nobody
    assert cluster_health(assignments, leaders, live_brokers={2, 3}).offline == 2


def test_isr_change_tells_shrinks_from_expansions() -> None:
    assert isr_change([1, 2, 3], [1, 3]) == isr_change([2, 1, 3], [3, 1])
    assert isr_change([1, 2, 3], [1, 3]).shrank
    assert isr_change([1], [1, 2]).expanded and not isr_change([1], [1, 2]).shrank
    unchanged = isr_change([1, 2], [2, 1])
    assert not unchanged.shrank and not unchanged.expanded


def test_api_names_are_kafkas() -> None:
    assert [api_name(k) for k in (0, 1, 3, 18, 23)] == [
        "Produce",
        "Fetch",
        "Metadata",
        "ApiVersions",
        "OffsetForLeaderEpoch",
    ]
    assert api_name(999) == api_name(-1) == UNKNOWN_API


def test_every_api_either_listener_serves_has_its_name() -> None:
    """A served API left out of the table would be counted as Unknown."""
    served = {*SERVED, *NATIVE_VERSIONS}
    assert [key for key in sorted(served) if api_name(key) == UNKNOWN_API] == []


def sample(metrics: BrokerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_requests_are_counted_per_api_and_listener_and_unknown_keys_share_one_series() -> None:
    metrics = BrokerMetrics()
    requests = metrics.listener(REPLOG_LISTENER)
    for key in (0, 0, 3, 500, 501, -1):
        requests.record(key, 3.0)
    metrics.listener("KAFKA").record(0, 30.0)
    total = "kafka_network_requestmetrics_requests_total"
    assert sample(metrics, total, request="Produce", listener="REPLOG") == 2
    assert sample(metrics, total, request="Metadata", listener="REPLOG") == 1
    assert sample(metrics, total, request=UNKNOWN_API, listener="REPLOG") == 3
    assert sample(metrics, total, request="Produce", listener="KAFKA") == 1
    histogram = "kafka_network_requestmetrics_totaltimems"
    assert sample(metrics, f"{histogram}_sum", request="Produce", listener="KAFKA") == 30.0
    assert (
        sample(metrics, f"{histogram}_bucket", request="Produce", listener="REPLOG", le="5.0") == 2
    )
    for key in range(1001, 2001):  # a fuzzer's made-up keys (1000 is replog's own)
        requests.record(key, 1.0)
    series = [
        sample
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == total and sample.labels["listener"] == "REPLOG"
    ]
    assert len(series) == 3  # Produce, Metadata and Unknown
    assert sample(metrics, total, request=UNKNOWN_API, listener="REPLOG") == 1003


def test_topic_traffic_and_forgetting_a_topic() -> None:
    metrics = BrokerMetrics()
    metrics.produced("a", 100, 10)
    metrics.produced("a", 50, 0)  # a retried duplicate: received, not appended
    metrics.fetched("a", 70)
    assert sample(metrics, "kafka_server_brokertopicmetrics_bytesin_total", topic="a") == 150
    assert sample(metrics, "kafka_server_brokertopicmetrics_messagesin_total", topic="a") == 10
    assert sample(metrics, "kafka_server_brokertopicmetrics_bytesout_total", topic="a") == 70
    metrics.forget_topic("a")
    metrics.forget_topic("never-seen")
    assert sample(metrics, "kafka_server_brokertopicmetrics_bytesin_total", topic="a") is None


def test_isr_changes_elections_and_sessions_are_counted() -> None:
    metrics = BrokerMetrics()
    metrics.isr_changed([1, 2, 3], [1, 2])
    metrics.isr_changed([1, 2], [1, 2, 3])
    metrics.isr_changed([1, 2], [1, 3])  # one left and one joined
    assert sample(metrics, "kafka_server_replicamanager_isrshrinks_total") == 2
    assert sample(metrics, "kafka_server_replicamanager_isrexpands_total") == 2
    metrics.leader_election(12.0, unclean=0)
    metrics.leader_election(40.0, unclean=2)
    stats = "kafka_controller_controllerstats_"
    assert sample(metrics, f"{stats}uncleanleaderelections_total") == 2
    assert sample(metrics, f"{stats}leaderelectionrateandtimems_count") == 2
    assert metrics.zookeeper_state == "lost"
    metrics.zookeeper_state_changed("CONNECTED")
    metrics.zookeeper_state_changed("LOST")
    metrics.zookeeper_state_changed("LOST", expected=True)  # closed at shutdown
    assert metrics.zookeeper_state == "lost"
    assert sample(metrics, "kafka_server_sessionexpirelistener_zookeeperexpires_total") == 1


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", RequestLine("GET", "/metrics")),
        (b"GET /metrics?name=x HTTP/1.0\r\n\r\n", RequestLine("GET", "/metrics")),
        (b"POST / HTTP/1.1\r\n\r\n", RequestLine("POST", "/")),
        (b"GET /metrics\r\n\r\n", None),
        (b"GET metrics HTTP/1.1\r\n\r\n", None),
        (b"GET /metrics SPDY/3\r\n\r\n", None),
        (b"\xff\xfe / HTTP/1.1\r\n\r\n", None),
    ],
)
def test_request_lines(head: bytes, expected: RequestLine | None) -> None:
    assert parse_request_line(head) == expected


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_answers_serve_only_get_metrics() -> None:
    metrics = BrokerMetrics()
    assert status_of(answer_for(None, metrics.registry)) == 400
    assert status_of(answer_for(RequestLine("GET", "/"), metrics.registry)) == 404
    refused = answer_for(RequestLine("POST", "/metrics"), metrics.registry)
    assert status_of(refused) == 405 and b"Allow: GET" in refused
    ok = answer_for(RequestLine("GET", "/metrics"), metrics.registry)
    head, body = ok.split(b"\r\n\r\n", 1)
    assert status_of(ok) == 200 and b"Connection: close" in head
    assert f"Content-Length: {len(body)}".encode() in head
    assert b"kafka_server_replicamanager_isrshrinks_total 0.0" in body


async def exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    writer.close()
    return answer


def test_the_server_answers_and_closes_each_connection() -> None:
    async def scenario() -> list[bytes]:
        metrics = BrokerMetrics()
        server = MetricsServer(metrics.registry, "127.0.0.1", 0)
        port = await server.start()
        try:
            return [
                await exchange(port, b"GET /metrics HTTP/1.1\r\n\r\n"),
                await exchange(port, b"GET /other HTTP/1.1\r\n\r\n"),
                await exchange(port, b"GET /" + b"x" * MAX_REQUEST_BYTES + b" HTTP/1.1\r\n\r\n"),
            ]
        finally:
            await server.close()

    metrics_answer, other, too_long = asyncio.run(scenario())
    assert status_of(metrics_answer) == 200
    assert status_of(other) == 404
    assert status_of(too_long) == 431


def test_the_collector_reads_partitions_as_their_leader_sees_them(tmp_path: Path) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    led = manager.ensure_partition(TP0, {"min.insync.replicas": "3"}, now_ms=0)
    led.make_leader(1, [1, 2], [1, 2, 3], 0, 1, now_ms=0)
    followed = manager.ensure_partition(TP1, {}, now_ms=0)
    followed.make_follower(2, 1, [2, 1], 1)
    metrics = manager.metrics
    metrics.registry.register(
        BrokerStateCollector(manager, ReplicaFetcherManager(1), lambda: None, lambda: "connected")
    )
    text = metrics.registry.get_sample_value
    assert text("kafka_server_replicamanager_partitioncount", {}) == 2
    assert text("kafka_server_replicamanager_leadercount", {}) == 1
    assert text("kafka_server_replicamanager_underreplicatedpartitions", {}) == 1
    assert text("kafka_server_replicamanager_underminisrpartitioncount", {}) == 1
    labels = {"topic": "t", "partition": "0"}
    assert text("kafka_cluster_partition_underreplicated", labels) == 1
    assert text("kafka_cluster_partition_underminisr", labels) == 1
    follower = {"topic": "t", "partition": "1"}
    assert text("kafka_cluster_partition_underreplicated", follower) is None  # leaders only
    assert text("kafka_log_log_logendoffset", follower) == 0
    assert text("kafka_controller_kafkacontroller_activecontrollercount", {}) == 0
    assert text("kafka_controller_kafkacontroller_offlinepartitionscount", {}) == 0
    assert text("kafka_server_sessionexpirelistener_sessionstate", {"state": "connected"}) == 1
    assert text("kafka_server_sessionexpirelistener_sessionstate", {"state": "lost"}) == 0
    families = {f.name for f in text_string_to_metric_families(generate(metrics))}
    assert {"kafka_log_log_size", "kafka_cluster_partition_highwatermark"} <= families
    manager.close()


def generate(metrics: BrokerMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_an_isr_the_controller_shrinks_under_a_leader_counts_as_its_shrink(
    tmp_path: Path,
) -> None:
    manager = ReplicaManager(BrokerConfig(1, tmp_path, "h:1"))
    partition = manager.ensure_partition(TP0, {}, now_ms=0)
    state = PartitionLeaderState(0, 1, 1, [1, 2, 3], 0, [1, 2, 3])
    manager.apply_leader_and_isr(partition, state, 1, now_ms=0)  # becomes leader: no change
    shrunk = PartitionLeaderState(0, 1, 2, [1, 3], 1, [1, 2, 3])  # broker 2 died
    manager.apply_leader_and_isr(partition, shrunk, 1, now_ms=0)
    samples = manager.metrics.registry.get_sample_value
    assert samples("kafka_server_replicamanager_isrshrinks_total", {}) == 1
    assert samples("kafka_server_replicamanager_isrexpands_total", {}) == 0
    manager.close()


def test_registration_carries_the_metrics_port_and_old_ones_decode_without() -> None:
    registration = znodes.BrokerRegistration(2, "h", 9092, "17", kafka_port=9093, metrics_port=9100)
    value = json.loads(registration.encode())
    assert value["metrics_port"] == 9100 and value["jmx_port"] == -1
    assert znodes.BrokerRegistration.decode(2, registration.encode()) == registration
    old = b'{"version":4,"host":"h","port":9092,"timestamp":"5","endpoints":["REPLOG://h:9092"]}'
    assert znodes.BrokerRegistration.decode(2, old).metrics_port == -1
