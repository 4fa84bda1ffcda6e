"""Group requests sent as Kafka clients send them, for tests of the group coordinator:
simple commits (no member, generation -1), OffsetFetch and FindCoordinator against one
broker's Kafka listener, retried while the coordinator is being created or loaded."""

from __future__ import annotations

import time

from spark_replica.client.kafka_admin import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from spark_replica.client.kafka_connection import KafkaConnection
from spark_replica.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.schema import Data
from tests.support import run

TIMEOUT_S = 10.0
# What a group request gets while the offsets topic is created or its partition loaded.
NOT_YET = {
    CoordinatorLoadInProgressError.code,
    CoordinatorNotAvailableError.code,
    NotCoordinatorError.code,
}


async def call(broker: BrokerProcess, api: tuple[int, int], body: Data) -> Data:
    connection = KafkaConnection(
        (broker.host, broker.kafka_port), SecurityConfig(), "group-tests", TIMEOUT_S
    )
    await connection.connect()
    try:
        return await connection.call(api, body)
    finally:
        await connection.close()


def commit(
    broker: BrokerProcess,
    group: str,
    topic: str,
    metadata: dict[int, str],
    offset: int = 7,
    deadline_s: float = 30.0,
) -> dict[int, int]:
    """A simple commit of `offset` on each partition, sent to `broker` (its group's
    coordinator): each partition's error code, once not all say "not yet"."""
    partitions = [
        Data(partition_index=p, committed_offset=offset, committed_metadata=m)
        for p, m in sorted(metadata.items())
    ]
    body = Data(
        group_id=group,
        generation_id=-1,
        member_id="",
        topics=[Data(name=topic, partitions=partitions)],
    )
    deadline = time.monotonic() + deadline_s
    while True:
        answer = run(call(broker, OFFSET_COMMIT, body))
        codes = {p.partition_index: p.error_code for t in answer.topics for p in t.partitions}
        if not set(codes.values()) <= NOT_YET or time.monotonic() > deadline:
            return codes
        time.sleep(0.1)


def committed(
    broker: BrokerProcess, group: str, deadline_s: float = 30.0
) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed offsets and metadata, as its coordinator `broker` answers."""
    deadline = time.monotonic() + deadline_s
    while True:
        answer = run(call(broker, OFFSET_FETCH, Data(group_id=group, topics=None)))
        if answer.error_code not in NOT_YET or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer.error_code == 0, answer.error_code
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    }


def find_coordinator(broker: BrokerProcess, group: str, deadline_s: float = 30.0) -> int:
    """The id of the broker coordinating `group`, asked of `broker`."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = run(call(broker, FIND_COORDINATOR, Data(key=group, key_type=0)))
        if found.error_code == 0:
            return int(found.node_id)
        assert found.error_code in NOT_YET and time.monotonic() < deadline, found.error_code
        time.sleep(0.1)
