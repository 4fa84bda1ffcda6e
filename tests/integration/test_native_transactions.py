"""The native client's TransactionalProducer through three real brokers, over replog's
own protocol (FindCoordinator, InitProducerId v1, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, Produce v1):

1. A committed transaction is read by a read_committed native consumer and by
   confluent-kafka's read_committed consumer (the Kafka listener), an aborted one by
   neither; read_uncommitted sees both.
2. Zombie fencing: a second producer with the same transactional id fences the first,
   whose open transaction is aborted (the successor's commit is read, which the zombie's
   records before it, still open, would hold back) and whose next send and every call
   after it raise ProducerFencedError.
3. send_offsets_to_transaction: the group's offsets are committed with the transaction
   and not with an aborted one, as confluent-kafka's Consumer.committed() reads them.
4. On the wire: every broker names the same coordinator, and the requests are decided
   as on the Kafka listener (an unknown key type refused, partitions added all or none).
5. A record the leader refuses makes the transaction abortable: only the abort is
   allowed, and the producer goes on with the next transaction.
6. replog's own RegisterSinkParticipants (a Spark sink task joining its micro-batch's
   transaction) on the wire: advertised, decided by the coordinator (registered, then
   already committed once the driver's EndTxn committed; a stale driver epoch fenced; an
   allocated producer id or an unknown partition refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_replica.client import (
    Cluster,
    ProducerConfig,
    TransactionalProducer,
)
from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    InvalidTxnStateError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionStateError,
    UnknownTopicOrPartitionError,
)
from spark_replica.records import DERIVED_PRODUCER_ID_BASE
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.add_partitions_to_txn import AddPartitionsToTxnRequest, TxnTopic
from spark_replica.wire.native.api_versions import ApiVersionsRequest
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.end_txn import EndTxnRequest
from spark_replica.wire.native.find_coordinator import FindCoordinatorRequest
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    SinkParticipant,
    SinkParticipantTopic,
)
from tests.kafka.clients import CLIENT_TIMEOUT_S, read_to_end, wait_for_topic
from tests.support import (
    FAST_REPLICATION,
    BrokerFactory,
    create,
    module_brokers,
    native_read_to_end,
    run,
)

pytestmark = pytest.mark.slow

# Few partitions keep the internal topics' creation and loads quick.
INTERNAL_PARTITIONS = 3
READ_WAIT_S = 30.0
RECORDS = 20


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("native-transactions"),
        3,
        **FAST_REPLICATION,
        **{
            "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS),
            "offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
        },
    ) as brokers:
        yield brokers


def make_topic(cluster: BrokerFactory, partitions: int = 2) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    run(create(cluster.bootstrap, topic, partitions))
    wait_for_topic(cluster.kafka_bootstrap(), topic, partitions)
    return topic


def native_values(cluster: BrokerFactory, topic: str, isolation: str) -> list[bytes]:
    return run(native_read_to_end(cluster.bootstrap, topic, isolation, READ_WAIT_S))[0]


def producer_config(transactional_id: str) -> ProducerConfig:
    return ProducerConfig(transactional_id=transactional_id, max_block_ms=30_000)


def test_committed_records_are_read_committed_and_aborted_ones_never(
    cluster: BrokerFactory,
) -> None:
    topic = make_topic(cluster)
    committed = [f"c{i}".encode() for i in range(RECORDS)]
    aborted = [f"a{i}".encode() for i in range(RECORDS)]

    async def produce() -> None:
        client = Cluster(cluster.bootstrap)
        try:
            producer = TransactionalProducer(client, producer_config(f"commit-{topic}"))
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send_records(topic, aborted, partition=0)
            await producer.send(topic, b"other partition", partition=1)
            await producer.abort_transaction()
            producer.begin_transaction()
            for value in committed:
                await producer.send(topic, value, partition=0)
            await producer.commit_transaction()
            with pytest.raises(TransactionStateError, match="begin_transaction first"):
                await producer.send(topic, b"outside", partition=0)
        finally:
            await client.close()

    run(produce())
    assert native_values(cluster, topic, "read_committed") == committed
    assert read_to_end(cluster.kafka_bootstrap(), topic, "read_committed") == committed
    assert native_values(cluster, topic, "read_uncommitted") == aborted + committed


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: BrokerFactory) -> None:
    topic = make_topic(cluster)
    transactional_id = f"zombie-{topic}"

    async def fence() -> None:
        client = Cluster(cluster.bootstrap)
        try:
            zombie = TransactionalProducer(client, producer_config(transactional_id))
            await zombie.init_transactions()
            zombie.begin_transaction()
            await zombie.send_records(topic, [b"zombie-0", b"zombie-1"], partition=0)
            successor = TransactionalProducer(client, producer_config(transactional_id))
            await successor.init_transactions()
            # Its next send to a partition new to the transaction asks the coordinator,
            # which knows it fenced; from then on every call raises the same.
            with pytest.raises(ProducerFencedError):
                await zombie.send(topic, b"zombie-late", partition=1)
            with pytest.raises(ProducerFencedError):
                await zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.begin_transaction()
            successor.begin_transaction()
            await successor.send(topic, b"successor", partition=0)
            await successor.commit_transaction()
        finally:
            await client.close()

    run(fence())
    assert native_values(cluster, topic, "read_committed") == [b"successor"]
    assert read_to_end(cluster.kafka_bootstrap(), topic, "read_committed") == [b"successor"]


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        asked = [KafkaTopicPartition(topic, p) for p in range(2)]
        return {
            tp.partition: tp.offset for tp in consumer.committed(asked, timeout=CLIENT_TIMEOUT_S)
        }
    finally:
        consumer.close()


def test_offsets_sent_to_a_transaction_are_committed_with_it_only(
    cluster: BrokerFactory,
) -> None:
    topic = make_topic(cluster)
    group = f"g-{topic}"

    async def transact(offset: int, commit: bool) -> None:
        client = Cluster(cluster.bootstrap)
        try:
            producer = TransactionalProducer(client, producer_config(f"offsets-{topic}"))
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send(topic, f"out-{offset}".encode(), partition=0)
            await producer.send_offsets_to_transaction(
                {TopicPartition(topic, 0): offset, TopicPartition(topic, 1): offset + 1}, group
            )
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
        finally:
            await client.close()

    run(transact(5, commit=True))
    assert committed_offsets(cluster.kafka_bootstrap(), group, topic) == {0: 5, 1: 6}
    run(transact(9, commit=False))
    assert committed_offsets(cluster.kafka_bootstrap(), group, topic) == {0: 5, 1: 6}
    assert read_to_end(cluster.kafka_bootstrap(), topic, "read_committed") == [b"out-5"]


async def coordinator_named_by(conn: BrokerConnection, transactional_id: str) -> int:
    """The coordinator `conn`'s broker names, once its metadata has the internal topic's
    leaders (COORDINATOR_NOT_AVAILABLE until then)."""
    async with asyncio.timeout(READ_WAIT_S):
        while True:
            try:
                return int((await conn.send(FindCoordinatorRequest(transactional_id))).node_id)
            except CoordinatorNotAvailableError:
                await asyncio.sleep(0.1)


def test_the_native_apis_answer_as_the_kafka_listener_decides(cluster: BrokerFactory) -> None:
    """Wire level: every broker names the same coordinator, a key type Kafka does not
    define is INVALID_REQUEST, and AddPartitionsToTxn adds all its partitions or none."""
    topic = make_topic(cluster, partitions=1)
    transactional_id = f"wire-{topic}"

    async def ask() -> None:
        connections = [BrokerConnection(host, port) for host, port in cluster.bootstrap]
        try:
            for conn in connections:
                await conn.connect()
            client = Cluster(cluster.bootstrap)
            try:
                # Creates __transaction_state on a fresh cluster, retrying meanwhile.
                producer = TransactionalProducer(client, producer_config(transactional_id))
                await producer.init_transactions()
                assert producer.identity is not None
                producer_id, epoch = producer.identity
            finally:
                await client.close()
            found = {await coordinator_named_by(conn, transactional_id) for conn in connections}
            assert len(found) == 1
            with pytest.raises(InvalidRequestError, match="key type 7"):
                await connections[0].send(FindCoordinatorRequest(transactional_id, 7))
            coordinator = connections[list(cluster.brokers).index(found.pop())]
            answer = await coordinator.send(
                AddPartitionsToTxnRequest(
                    transactional_id,
                    producer_id,
                    epoch,
                    [TxnTopic(topic, [0, 5])],
                )
            )
            codes = {p.partition: p.error_code for p in answer.topics[0].partitions}
            assert codes == {
                0: OperationNotAttemptedError.code,
                5: UnknownTopicOrPartitionError.code,
            }
        finally:
            for conn in connections:
                await conn.close()

    run(ask())


def test_a_record_refused_inside_a_transaction_allows_only_an_abort(
    cluster: BrokerFactory,
) -> None:
    """A batch the leader refuses (over the topic's max.message.bytes) makes the
    transaction abortable: commit raises TransactionAbortableError, abort works, and the
    next transaction commits."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    run(create(cluster.bootstrap, topic, 1, **{"max.message.bytes": "2000"}))

    async def transact() -> None:
        client = Cluster(cluster.bootstrap)
        try:
            producer = TransactionalProducer(client, producer_config(f"abortable-{topic}"))
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send(topic, b"lost with the abort", partition=0)
            await producer.flush()
            await producer.send(topic, b"x" * 10_000, partition=0)
            with pytest.raises(TransactionAbortableError, match="abort_transaction"):
                await producer.commit_transaction()
            with pytest.raises(TransactionAbortableError):
                await producer.send(topic, b"refused", partition=0)
            await producer.abort_transaction()
            producer.begin_transaction()
            await producer.send(topic, b"after the abort", partition=0)
            await producer.commit_transaction()
        finally:
            await client.close()

    run(transact())
    assert native_values(cluster, topic, "read_committed") == [b"after the abort"]


def test_a_sink_task_registers_its_participants_on_the_wire(cluster: BrokerFactory) -> None:
    """RegisterSinkParticipants through the driver's coordinator: advertised at (0, 0);
    the first registration of micro-batch 3 opens its transaction, a zombie's older
    micro-batch is INVALID_TXN_STATE, an allocated producer id INVALID_REQUEST, an
    unknown partition UNKNOWN_TOPIC_OR_PARTITION; once the driver's EndTxn committed, a
    rerun of micro-batch 3 is answered already_committed, and after a new driver epoch
    the old one is fenced."""
    topic = make_topic(cluster)
    transactional_id = f"replog-sink-{topic}"
    task = DERIVED_PRODUCER_ID_BASE + 17

    def register(
        producer: tuple[int, int], micro_batch: int, *participants: SinkParticipant
    ) -> RegisterSinkParticipantsRequest:
        return RegisterSinkParticipantsRequest(
            transactional_id,
            *producer,
            micro_batch,
            [SinkParticipantTopic(topic, list(participants))],
        )

    async def ask() -> None:
        client = Cluster(cluster.bootstrap)
        try:
            driver = TransactionalProducer(client, producer_config(transactional_id))
            await driver.init_transactions()
            assert driver.identity is not None
            first = driver.identity
            coordinator = await client.connection(
                await coordinator_named_by(await client.connection(1), transactional_id)
            )
            versions = (await coordinator.send(ApiVersionsRequest())).versions
            advertised = {v.api_key: (v.min_version, v.max_version) for v in versions}
            assert advertised[ApiKey.REGISTER_SINK_PARTICIPANTS] == (0, 0)

            answer = await coordinator.send(register(first, 3, SinkParticipant(0, task, 3)))
            assert answer.already_committed is False
            answer = await coordinator.send(register(first, 3, SinkParticipant(1, task, 3)))
            assert answer.already_committed is False
            with pytest.raises(InvalidTxnStateError):
                await coordinator.send(register(first, 2, SinkParticipant(0, task, 2)))
            with pytest.raises(InvalidRequestError):
                await coordinator.send(register(first, 3, SinkParticipant(0, 5, 0)))
            with pytest.raises(UnknownTopicOrPartitionError):
                await coordinator.send(register(first, 3, SinkParticipant(9, task, 3)))
            await coordinator.send(EndTxnRequest(transactional_id, *first, True))
            rerun = register(first, 3, SinkParticipant(0, task, 3))
            async with asyncio.timeout(READ_WAIT_S):
                while True:  # CONCURRENT_TRANSACTIONS while the markers are written
                    with contextlib.suppress(ConcurrentTransactionsError):
                        answer = await coordinator.send(rerun)
                        break
                    await asyncio.sleep(0.05)
            assert answer.already_committed is True

            successor = TransactionalProducer(client, producer_config(transactional_id))
            await successor.init_transactions()
            with pytest.raises(ProducerFencedError):
                await coordinator.send(register(first, 4, SinkParticipant(0, task + 1, 4)))
        finally:
            await client.close()

    run(ask())
