"""Each broker's /metrics, scraped over HTTP from a real 3-broker cluster: the values
after producing and consuming, after a broker is killed, and after it comes back."""

from __future__ import annotations

import urllib.request
from typing import TypeVar

import pytest
from confluent_kafka import Producer as KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.zk import znodes
from spark_replica.zk.session import connect
from tests.support import (
    BrokerFactory,
    create,
    eventually,
    leadership,
    produce,
    read_everything,
    run,
    start_cluster,
)

pytestmark = pytest.mark.slow

T = TypeVar("T")
RECORDS = 200
KAFKA_RECORDS = 5


class Scrape:
    """One scrape of one broker, parsed by prometheus-client's own parser."""

    def __init__(self, broker: BrokerProcess) -> None:
        assert broker.metrics_url is not None
        with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
            assert response.status == 200
            text = response.read().decode()
        self.samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels (0 when absent, as for a fresh counter)."""
        for sample in self.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
        return 0.0

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples whose labels include these."""
        return sum(
            s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items()
        )


def produce_over_kafka(bootstrap: str, topic: str, partition: int) -> None:
    """A few records through the Kafka listener, by a Kafka client (gone on return)."""
    kafka = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(KAFKA_RECORDS):
        kafka.produce(topic, value=f"k{i}".encode(), partition=partition)
    assert kafka.flush(20) == 0


def leaders(bootstrap: list[tuple[str, int]], topic: str) -> dict[int, int]:
    """Partition -> leader broker id, from metadata."""
    return {
        int(str(p["partition"])): int(str(p["leader"])) for p in run(leadership(bootstrap, topic))
    }


def scrape_all(brokers: list[BrokerProcess]) -> dict[int, Scrape]:
    return {b.broker_id: Scrape(b) for b in brokers}


RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"


def test_metrics_follow_a_broker_kill_and_its_return(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap
    everyone = list(brokers.brokers.values())
    run(create(bootstrap, "replicated", partitions=3, rf=3))
    run(create(bootstrap, "single", partitions=1, rf=1))
    victim_id = leaders(bootstrap, "single")[0]
    victim = brokers.brokers[victim_id]
    survivors = [b for b in everyone if b is not victim]

    zk = connect(brokers.zk_connect)
    try:
        for broker in everyone:
            data, _ = zk.get(znodes.broker_path(broker.broker_id))
            registered = znodes.BrokerRegistration.decode(broker.broker_id, data)
            assert registered.metrics_port == broker.metrics_port
    finally:
        zk.stop()
        zk.close()

    run(produce(bootstrap, "replicated", [f"v{i}" for i in range(RECORDS)]))
    run(produce(bootstrap, "single", ["s"] * 10))
    produce_over_kafka(brokers.kafka_bootstrap(), "replicated", partition=1)
    assert len(run(read_everything(bootstrap, "replicated", RECORDS + KAFKA_RECORDS))) == (
        RECORDS + KAFKA_RECORDS
    )
    placement = leaders(bootstrap, "replicated")
    leader0 = brokers.brokers[placement[0]]
    p0 = {"topic": "replicated", "partition": "0"}

    def replicated_everywhere() -> dict[int, Scrape] | None:
        scrapes = scrape_all(everyone)
        in_sync = all(s.value(f"{RM}underreplicatedpartitions") == 0 for s in scrapes.values())
        copied = all(
            s.value("kafka_log_log_logendoffset", **p0) == RECORDS for s in scrapes.values()
        )
        return scrapes if in_sync and copied else None

    before = eventually(replicated_everywhere, "every replica of partition 0 in sync")
    assert sum(s.value(f"{RM}partitioncount") for s in before.values()) == 3 * 3 + 1
    assert sum(s.value(f"{RM}leadercount") for s in before.values()) == 3 + 1
    assert sum(s.value(f"{KC}activecontrollercount") for s in before.values()) == 1
    for scrape in before.values():
        assert (
            scrape.value("kafka_server_sessionexpirelistener_sessionstate", state="connected") == 1
        )
        assert scrape.value(f"{KC}offlinepartitionscount") == 0
    led = before[leader0.broker_id]
    assert led.value("kafka_cluster_partition_highwatermark", **p0) == RECORDS
    assert led.value("kafka_log_log_size", **p0) > 0
    topic = {"topic": "replicated"}
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert sum(s.value(messages_in, **topic) for s in before.values()) == RECORDS + KAFKA_RECORDS
    assert led.value(messages_in, **topic) >= RECORDS and led.value(bytes_in, **topic) > 0
    assert led.value("kafka_server_brokertopicmetrics_bytesout_total", **topic) > 0
    requests = "kafka_network_requestmetrics_requests_total"
    assert led.value(requests, request="Produce", listener="REPLOG") >= 1
    assert led.value(requests, request="Fetch", listener="REPLOG") >= 1  # its followers' too
    leader1 = before[placement[1]]
    assert leader1.value(requests, request="Produce", listener="KAFKA") >= 1
    assert (
        leader1.value(
            "kafka_network_requestmetrics_totaltimems_count", request="Produce", listener="KAFKA"
        )
        >= 1
    )
    assert (
        sum(s.value(requests, request="Metadata", listener="REPLOG") for s in before.values()) >= 1
    )
    shrinks_before = sum(s.value(f"{RM}isrshrinks_total") for s in before.values())

    victim.kill()

    def failed_over() -> dict[int, Scrape] | None:
        scrapes = scrape_all(survivors)
        controller = [s for s in scrapes.values() if s.value(f"{KC}activecontrollercount") == 1]
        under = sum(s.value(f"{RM}underreplicatedpartitions") for s in scrapes.values())
        if (
            len(controller) != 1
            or under != 3
            or controller[0].value(f"{KC}offlinepartitionscount") != 1
        ):
            return None
        return scrapes

    after_kill = eventually(failed_over, "3 partitions under-replicated and 1 offline")
    for scrape in after_kill.values():
        led_here = scrape.value(f"{RM}leadercount")
        assert scrape.value(f"{RM}underreplicatedpartitions") == led_here
        assert (
            scrape.total("kafka_cluster_partition_underreplicated", topic="replicated") == led_here
        )
    assert sum(s.value(f"{RM}isrshrinks_total") for s in after_kill.values()) > shrinks_before
    controller = next(s for s in after_kill.values() if s.value(f"{KC}activecontrollercount"))
    elections = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
    assert controller.value(elections) >= 1
    expands_before = sum(s.value(f"{RM}isrexpands_total") for s in after_kill.values())

    brokers.start(victim_id)

    def healed() -> dict[int, Scrape] | None:
        scrapes = scrape_all(everyone)
        under = sum(s.value(f"{RM}underreplicatedpartitions") for s in scrapes.values())
        offline = sum(s.value(f"{KC}offlinepartitionscount") for s in scrapes.values())
        return scrapes if under == 0 and offline == 0 else None

    after_return = eventually(healed, "no partition under-replicated or offline")
    assert sum(s.value(f"{KC}activecontrollercount") for s in after_return.values()) == 1
    assert sum(s.value(f"{RM}isrexpands_total") for s in after_return.values()) > expands_before
    returned = after_return[victim_id]
    assert returned.value("kafka_server_sessionexpirelistener_sessionstate", state="connected") == 1
    assert returned.value("kafka_log_log_logendoffset", **p0) == RECORDS


def test_an_unclean_election_is_counted_by_the_controller(brokers: BrokerFactory) -> None:
    start_cluster(brokers, count=2)
    bootstrap = brokers.bootstrap
    run(create(bootstrap, "dirty", rf=2, **{"unclean.leader.election.enable": "true"}))
    leader_id = leaders(bootstrap, "dirty")[0]
    leader = brokers.brokers[leader_id]
    follower_id = 3 - leader_id
    brokers.brokers[follower_id].kill()
    eventually(
        lambda: Scrape(leader).value(f"{RM}underreplicatedpartitions") == 1,
        "the follower out of the ISR",
    )
    leader.kill()
    returned = brokers.start(follower_id)  # the only live replica, never in sync since

    def elected() -> Scrape | None:
        scrape = Scrape(returned)
        return scrape if scrape.value(f"{RM}leadercount") == 1 else None

    scrape = eventually(elected, "the returned follower leading")
    stats = "kafka_controller_controllerstats_"
    assert scrape.value(f"{stats}uncleanleaderelections_total") == 1
    assert scrape.value(f"{stats}leaderelectionrateandtimems_count") >= 1
    assert scrape.value(f"{KC}offlinepartitionscount") == 0
