"""CreateTopics and CreatePartitions refuse a partition count above the broker's
max.partitions.per.topic before anything is built, on both listeners and with
validate_only too.

Before, a Kafka CreateTopics with validate_only built a replica assignment for whatever
count it named (2^31-1 would take the broker's memory), and the replog listener's bound
was a fixed 100,000, past what a znode holds.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from spark_replica.client import Admin, Cluster
from spark_replica.errors import InvalidPartitionsError
from tests.support import BrokerFactory, run

pytestmark = pytest.mark.slow

BOUND = 20
DEADLINE_S = 30.0
# So many that building their assignment would take seconds and gigabytes.
HUGE = 2**31 - 1
LIBRDKAFKA_MAX = 100_000  # the most confluent-kafka lets a NewTopic ask for


def kafka_error(future: object) -> str:
    with pytest.raises(KafkaException) as caught:
        future.result(DEADLINE_S)  # type: ignore[attr-defined]
    return caught.value.args[0].name()


def test_partition_counts_over_the_bound_are_refused_on_both_listeners(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1, **{"max.partitions.per.topic": str(BOUND)})
    admin = AdminClient({"bootstrap.servers": brokers.kafka_bootstrap()})

    started = time.monotonic()
    for count in (BOUND + 1, LIBRDKAFKA_MAX):
        for validate_only in (True, False):
            asked = admin.create_topics([NewTopic("wide", count, 1)], validate_only=validate_only)
            assert kafka_error(asked["wide"]) == "INVALID_PARTITIONS", (count, validate_only)
    assert time.monotonic() - started < 10, "refused without building anything"
    assert "wide" not in admin.list_topics(timeout=10).topics

    admin.create_topics([NewTopic("wide", BOUND, 1)])["wide"].result(DEADLINE_S)
    for validate_only in (True, False):
        grown = admin.create_partitions(
            [NewPartitions("wide", BOUND + 1)], validate_only=validate_only
        )
        assert kafka_error(grown["wide"]) == "INVALID_PARTITIONS"

    async def native() -> None:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            for count in (BOUND + 1, HUGE):
                with pytest.raises(InvalidPartitionsError, match=r"max\.partitions\.per\.topic"):
                    await Admin(cluster).create_topic("native-wide", count, 1)
                with pytest.raises(InvalidPartitionsError, match=r"max\.partitions\.per\.topic"):
                    await Admin(cluster).create_partitions("wide", count)
            assert "native-wide" not in await Admin(cluster).list_topics()
        finally:
            await cluster.close()

    run(native())
