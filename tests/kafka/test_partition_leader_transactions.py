"""The partition leaders' side of Kafka transactions, through real brokers (three, one
topic of three replicas): transactional batches produced on the Kafka listener,
WriteTxnMarkers ending their transactions, by the Kafka API (as `kafka-transactions
abort` or a coordinator sends it) and by replog's inter-broker API of the same number,
and offsets committed in transactions (TxnOffsetCommit), visible once their marker
lands on the group's offsets partition, kept pending across a coordinator failover.

The transactions are written by hand (Produce and WriteTxnMarkers requests built here)
because the coordinator that a Kafka client's `init_transactions` needs is wired
elsewhere; what is checked is what the leaders do with what a transactional client and a
coordinator send, and what confluent-kafka and aiokafka consumers read from it: under
read_committed only committed transactions' records, up to the last stable offset, the
aborted ones dropped (which only works if the fetched batches carry the transactional
bit); under read_uncommitted everything.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from brokerd.core.txn_marker_sender import TxnMarkerSender
from brokerd.core.txn_markers import MarkerEntry, MarkerErrors
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    NotLeaderOrFollowerError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from spark_replica.records import compute_crc
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition, offsets_partition_for
from spark_replica.wire.native.write_txn_markers import (
    MarkerTopic,
    TxnMarkerRequestEntry,
    WriteTxnMarkersRequest,
)
from spark_replica.wire.schema import Data
from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    POLL_S,
    aiokafka_read,
    leader_of,
    make_topic,
    read_to_end,
    wait_for_topic,
)
from tests.support import (
    FAST_REPLICATION,
    BrokerFactory,
    BrokerProcess,
    eventually,
    module_brokers,
    run,
)
from tests.support_groups import NOT_YET, call, commit, committed, find_coordinator

pytestmark = pytest.mark.slow

TOPIC = "txn-out"
PRODUCE = (0, 8)
WRITE_TXN_MARKERS = (27, 1)
# Producer ids far above those the brokers hand out.
COMMITTED, ABORTED, OPEN, SENT = 2**40 + 11, 2**40 + 12, 2**40 + 13, 2**40 + 14
EPOCH = 1
COORDINATOR_EPOCH = 3
CONTROL_BIT = 0x20
ATTRIBUTES_AT = 21
CRC_AT = 17


@pytest.fixture(scope="module")
def cluster(zookeeper: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,  # type: ignore[attr-defined]
        tmp_path_factory.mktemp("txn-produce"),
        count=3,
        **FAST_REPLICATION,
        # Few partitions keep the topic's creation and loads quick.
        **{"transaction.state.log.num.partitions": "5"},
    ) as brokers:
        make_topic(brokers, TOPIC, 1, rf=3)
        yield brokers


def transactional_batch(producer_id: int, sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=1,
        producer_id=producer_id,
        producer_epoch=EPOCH,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(broker: BrokerProcess, records: bytes, transactional_id: str | None) -> Data:
    """One Kafka Produce (acks=all) of `records` to partition 0: its partition answer."""
    body = Data(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[Data(name=TOPIC, partition_data=[Data(index=0, records=records)])],
    )
    response = run(call(broker, PRODUCE, body))
    [topic] = response.responses
    [answer] = topic.partition_responses
    return answer


def end_by_kafka_api(
    broker: BrokerProcess,
    producer_id: int,
    committed: bool,
    epoch: int = EPOCH,
    partitions: tuple[TopicPartition, ...] = (
        TopicPartition(TOPIC, 0),
        TopicPartition("no-such-topic", 0),
    ),
) -> dict[tuple[str, int], int]:
    """WriteTxnMarkers by the Kafka API: each partition's error code."""
    body = Data(
        markers=[
            Data(
                producer_id=producer_id,
                producer_epoch=epoch,
                transaction_result=committed,
                topics=[Data(name=tp.topic, partition_indexes=[tp.partition]) for tp in partitions],
                coordinator_epoch=COORDINATOR_EPOCH,
            )
        ]
    )
    response = run(call(broker, WRITE_TXN_MARKERS, body))
    [marker] = response.markers
    assert marker.producer_id == producer_id
    return {(t.name, p.partition_index): p.error_code for t in marker.topics for p in t.partitions}


def end_by_inter_broker_api(
    broker: BrokerProcess, producer_id: int, committed: bool
) -> dict[tuple[str, int], int]:
    """WriteTxnMarkers by replog's inter-broker API: each partition's error code."""
    request = WriteTxnMarkersRequest(
        [
            TxnMarkerRequestEntry(
                producer_id, EPOCH, committed, COORDINATOR_EPOCH, [MarkerTopic(TOPIC, [0])]
            )
        ],
        10_000,
    )

    async def send() -> dict[tuple[str, int], int]:
        connection = BrokerConnection(broker.host, broker.port, client_id="txn-tests")
        await connection.connect()
        try:
            response = await connection.send(request, timeout_s=CLIENT_TIMEOUT_S)
        finally:
            await connection.close()
        [marker] = response.markers
        return {(t.topic, p.partition): p.error_code for t in marker.topics for p in t.partitions}

    return run(send())


def test_produce_refuses_what_kafka_refuses(cluster: BrokerFactory) -> None:
    leader = cluster.brokers[leader_of(cluster.kafka_bootstrap(), TOPIC, 0)]
    batch = transactional_batch(OPEN, 0, [b"never"])
    refused = produce(leader, batch, transactional_id=None)
    assert refused.error_code == TransactionalIdAuthorizationFailedError.code
    control = bytearray(batch)
    control[ATTRIBUTES_AT + 1] |= CONTROL_BIT
    control[CRC_AT : CRC_AT + 4] = compute_crc(control).to_bytes(4, "big")
    assert produce(leader, bytes(control), "tx-open").error_code == InvalidRecordError.code
    assert read_to_end(cluster.kafka_bootstrap(), TOPIC, "read_uncommitted") == []


def test_transactions_end_by_their_markers_and_read_committed_sees_only_commits(
    cluster: BrokerFactory,
) -> None:
    bootstrap = cluster.kafka_bootstrap()
    leader_id = leader_of(bootstrap, TOPIC, 0)
    leader = cluster.brokers[leader_id]
    follower = next(b for i, b in cluster.brokers.items() if i != leader_id)

    assert (
        produce(leader, transactional_batch(COMMITTED, 0, [b"c0", b"c1"]), "tx-c").error_code == 0
    )
    assert produce(leader, transactional_batch(ABORTED, 0, [b"a0"]), "tx-a").error_code == 0
    assert produce(leader, transactional_batch(COMMITTED, 2, [b"c2"]), "tx-c").error_code == 0
    # Open transactions hold the LSO at the first of them: nothing reads yet.
    assert read_to_end(bootstrap, TOPIC, "read_committed") == []
    assert read_to_end(bootstrap, TOPIC, "read_uncommitted") == [b"c0", b"c1", b"a0", b"c2"]

    # Only the leader writes markers; a stale producer epoch is fenced.
    assert end_by_kafka_api(follower, COMMITTED, True)[(TOPIC, 0)] == NotLeaderOrFollowerError.code
    assert end_by_kafka_api(leader, COMMITTED, True, epoch=EPOCH - 1) == {
        (TOPIC, 0): InvalidProducerEpochError.code,
        ("no-such-topic", 0): UnknownTopicOrPartitionError.code,
    }
    assert end_by_inter_broker_api(follower, ABORTED, False) == {
        (TOPIC, 0): NotLeaderOrFollowerError.code
    }

    assert end_by_kafka_api(leader, COMMITTED, True)[(TOPIC, 0)] == 0
    # The aborted producer's transaction, open since offset 2, still holds the LSO.
    assert read_to_end(bootstrap, TOPIC, "read_committed") == [b"c0", b"c1"]
    assert end_by_inter_broker_api(leader, ABORTED, False) == {(TOPIC, 0): 0}

    committed = [b"c0", b"c1", b"c2"]
    assert read_to_end(bootstrap, TOPIC, "read_committed") == committed
    # Offsets 0-3 hold data, 4 and 5 the markers: the LSO is the HW, 6.
    assert run(aiokafka_read(bootstrap, TOPIC, "read_committed")) == (committed, 6)
    assert read_to_end(bootstrap, TOPIC, "read_uncommitted") == [b"c0", b"c1", b"a0", b"c2"]


def test_a_coordinator_reaches_a_leader_on_another_broker_through_its_sender(
    cluster: BrokerFactory,
) -> None:
    """TxnMarkerSender, the client a coordinator uses for leaders on other brokers:
    the leader answers per partition, and a broker it cannot reach is a retriable error
    for every partition it was asked for."""
    bootstrap = cluster.kafka_bootstrap()
    leader_id = leader_of(bootstrap, TOPIC, 0)
    leader = cluster.brokers[leader_id]
    assert produce(leader, transactional_batch(SENT, 0, [b"s0"]), "tx-s").error_code == 0
    addresses = {i: (b.host, b.port) for i, b in cluster.brokers.items()}
    sender = TxnMarkerSender("txn-tests", None, addresses.get)
    tp = TopicPartition(TOPIC, 0)
    markers = [MarkerEntry(SENT, EPOCH, True, COORDINATOR_EPOCH, (tp,))]

    async def send() -> tuple[MarkerErrors, MarkerErrors]:
        try:
            unknown = await sender.send_markers(99, markers)
            sent = await sender.send_markers(leader_id, markers)
        finally:
            await sender.close()
        return unknown, sent

    unknown, sent = run(send())
    assert sent == [{tp: None}]
    refused = unknown[0][tp]
    assert refused is not None and refused.retriable
    assert read_to_end(bootstrap, TOPIC, "read_committed")[-1] == b"s0"


# --------------------------------------------------------------------------- offsets

GROUP = "txn-group"
OFFSETS_PRODUCER = 2**40 + 21
TXN_OFFSET_COMMIT = (28, 3)
STABLE_OFFSET_FETCH = (9, 7)


def commit_in_transaction(broker: BrokerProcess, offset: int, deadline_s: float = 30.0) -> int:
    """TxnOffsetCommit of `offset` on the topic's partition 0 for GROUP, as a simple
    consumer's: the partition's error code, once the coordinator is not loading."""
    body = Data(
        transactional_id="tx-offsets",
        group_id=GROUP,
        producer_id=OFFSETS_PRODUCER,
        producer_epoch=EPOCH,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            Data(
                name=TOPIC,
                partitions=[
                    Data(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="in-txn",
                    )
                ],
            )
        ],
    )
    deadline = time.monotonic() + deadline_s
    while True:
        answer = run(call(broker, TXN_OFFSET_COMMIT, body))
        [[code]] = [[p.error_code for p in t.partitions] for t in answer.topics]
        if code not in NOT_YET or time.monotonic() > deadline:
            return code
        time.sleep(0.1)


def stable_offset(broker: BrokerProcess, group: str = GROUP, topic: str = TOPIC) -> tuple[int, int]:
    """OffsetFetch v7 with require_stable of partition 0: (error code, offset)."""
    body = Data(
        group_id=group, topics=[Data(name=topic, partition_indexes=[0])], require_stable=True
    )
    answer = run(call(broker, STABLE_OFFSET_FETCH, body))
    [[found]] = [t.partitions for t in answer.topics]
    return found.error_code, found.committed_offset


def offsets_partition(cluster: BrokerFactory) -> TopicPartition:
    count = len(
        wait_for_topic(cluster.kafka_bootstrap(), OFFSETS_TOPIC, 50)
        .topics[OFFSETS_TOPIC]
        .partitions
    )
    return TopicPartition(OFFSETS_TOPIC, offsets_partition_for(GROUP, count))


def end_offsets_transaction(broker: BrokerProcess, tp: TopicPartition, committed: bool) -> int:
    return end_by_kafka_api(broker, OFFSETS_PRODUCER, committed, partitions=(tp,))[
        (tp.topic, tp.partition)
    ]


def test_offsets_committed_in_a_transaction_show_once_it_commits(cluster: BrokerFactory) -> None:
    any_broker = next(iter(cluster.brokers.values()))
    coordinator = cluster.brokers[find_coordinator(any_broker, GROUP)]
    assert commit(coordinator, GROUP, TOPIC, {0: ""}, offset=1) == {0: 0}
    holding = offsets_partition(cluster)

    assert commit_in_transaction(coordinator, 4) == 0
    assert committed(coordinator, GROUP) == {(TOPIC, 0): (1, "")}
    assert stable_offset(coordinator)[0] == UnstableOffsetCommitError.code
    assert end_offsets_transaction(coordinator, holding, committed=True) == 0
    assert committed(coordinator, GROUP) == {(TOPIC, 0): (4, "in-txn")}
    assert stable_offset(coordinator) == (0, 4)

    assert commit_in_transaction(coordinator, 9) == 0
    assert end_offsets_transaction(coordinator, holding, committed=False) == 0
    assert committed(coordinator, GROUP) == {(TOPIC, 0): (4, "in-txn")}
    assert stable_offset(coordinator) == (0, 4)


CTP_INPUT, CTP_OUTPUT, CTP_GROUP = "ctp-in", "ctp-out", "ctp-group"
CTP_RECORDS = 40


def consume_some(consumer: Consumer, count: int) -> list[bytes]:
    """The next `count` values the consumer reads, within the clients' deadline."""
    values: list[bytes] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while len(values) < count:
        assert time.monotonic() < deadline, f"read {len(values)} of {count}"
        for message in consumer.consume(num_messages=count - len(values), timeout=POLL_S):
            assert message.error() is None, message.error()
            values.append(message.value())
    return values


def test_consume_transform_produce_commits_offsets_with_the_output(
    cluster: BrokerFactory,
) -> None:
    """confluent-kafka's consume-transform-produce loop, end to end through the
    coordinator: a committed transaction's output and its consumer offsets appear
    together; an aborted one leaves neither, and the loop resumes from the last commit."""
    bootstrap = cluster.kafka_bootstrap()
    make_topic(cluster, CTP_INPUT, 1, rf=3)
    make_topic(cluster, CTP_OUTPUT, 1, rf=3)
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(CTP_RECORDS):
        source.produce(CTP_INPUT, f"in-{i}".encode(), partition=0)
    assert source.flush(CLIENT_TIMEOUT_S) == 0
    half = CTP_RECORDS // 2

    def run_loop(commit_first: bool) -> list[bytes]:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": CTP_GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": "ctp-tx", "linger.ms": 5}
        )
        try:
            consumer.assign([KafkaTopicPartition(CTP_INPUT, 0)])
            producer.init_transactions(CLIENT_TIMEOUT_S)
            producer.begin_transaction()
            values = consume_some(consumer, half)
            for value in values:
                producer.produce(CTP_OUTPUT, b"out-" + value, partition=0)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                CLIENT_TIMEOUT_S,
            )
            if commit_first:
                producer.commit_transaction(CLIENT_TIMEOUT_S)
            else:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
            return values
        finally:
            consumer.close()
            producer.flush(5)

    coordinator = cluster.brokers[find_coordinator(next(iter(cluster.brokers.values())), CTP_GROUP)]

    def settles(offset: int, output: list[bytes]) -> None:
        """EndTxn is answered before the markers are written (Kafka's order): wait for
        the group's offsets to be stable at `offset` and the output to read `output`."""
        eventually(
            lambda: stable_offset(coordinator, CTP_GROUP, CTP_INPUT) == (0, offset),
            f"offset {offset} stable",
        )
        eventually(
            lambda: read_to_end(bootstrap, CTP_OUTPUT, "read_committed") == output, "the output"
        )

    first = run_loop(commit_first=True)
    assert first == [f"in-{i}".encode() for i in range(half)]
    settles(half, [b"out-" + v for v in first])
    second = run_loop(commit_first=False)
    assert second == [f"in-{i}".encode() for i in range(half, CTP_RECORDS)]
    settles(half, [b"out-" + v for v in first])
    # The next run resumes where the committed transaction left off.
    assert run_loop(commit_first=True) == second
    settles(CTP_RECORDS, [b"out-" + v for v in first + second])
    assert committed(coordinator, CTP_GROUP) == {(CTP_INPUT, 0): (CTP_RECORDS, "")}


def test_pending_offsets_survive_a_coordinator_failover(cluster: BrokerFactory) -> None:
    """It kills the group's coordinator (and starts it again at the end, so that the
    module's other tests, in whatever order they run, find three brokers). The next
    coordinator loads the offsets partition from its log: the open transaction's offset
    pending there, the committed one in place, and the marker it then writes applies it."""
    any_broker = next(iter(cluster.brokers.values()))
    old_id = find_coordinator(any_broker, GROUP)
    old = cluster.brokers[old_id]
    assert commit(old, GROUP, TOPIC, {0: "in-txn"}, offset=4) == {0: 0}
    assert commit_in_transaction(old, 12) == 0
    old.kill()
    try:
        survivor = next(b for i, b in cluster.brokers.items() if i != old_id)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        new_id = find_coordinator(survivor, GROUP)
        while new_id == old_id and time.monotonic() < deadline:
            time.sleep(0.2)
            new_id = find_coordinator(survivor, GROUP)
        assert new_id != old_id, "no new coordinator"
        new = cluster.brokers[new_id]
        assert committed(new, GROUP) == {(TOPIC, 0): (4, "in-txn")}
        assert stable_offset(new)[0] == UnstableOffsetCommitError.code
        holding = offsets_partition(cluster)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while (code := end_offsets_transaction(new, holding, committed=True)) != 0:
            assert time.monotonic() < deadline, f"marker refused: {code}"
            time.sleep(0.2)
        assert committed(new, GROUP) == {(TOPIC, 0): (12, "in-txn")}
        assert stable_offset(new) == (0, 12)
    finally:
        old.start()
