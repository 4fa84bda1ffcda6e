"""The transaction coordinator through Kafka's clients, on one three-broker cluster.

1. confluent-kafka's transactional producer initialises against replog (FindCoordinator
   with the transaction key type, `__transaction_state` created on that first use,
   InitProducerId with the transactional id), and a second producer with the same
   transactional.id fences the first: the same producer id, the epoch bumped, and the
   first producer's next transaction fails fenced (its AddPartitionsToTxn is refused).
   aiokafka's transactional producer is fenced the same way.
2. `replog transactions list|describe --json` show what the clients did: the id, its
   coordinator (the broker FindCoordinator names), producer id, epoch and state.
   Here the CLI is checked against the clients' own handshake: the coordinator
   FindCoordinator answers them and the epochs InitProducerId gave (kafka-python's admin
   API for transactions is compared with it in test_transactions_admin_agree.py).
3. By raw requests: InitProducerId with a transactional id is answered NOT_COORDINATOR by
   the brokers that do not coordinate it, and INVALID_TRANSACTION_TIMEOUT above
   transaction.max.timeout.ms; a stale epoch is PRODUCER_FENCED to EndTxn v2+ and
   INVALID_PRODUCER_EPOCH to the versions before, which predate that code.
4. The markers, where the coordinator leads the partition: a transaction without records
   committed by EndTxn completes (CompleteCommit) once its COMMIT marker is in the
   partition; one left open past its timeout is aborted by the coordinator's sweep, its
   producer fenced (epoch bumped, a late EndTxn PRODUCER_FENCED), its ABORT marker written.
   The fence reaches the group coordinator too: the aborted transaction's ABORT marker
   is in the group's offsets partition, so the old producer's late TxnOffsetCommit is
   answered INVALID_PRODUCER_EPOCH at once, as Kafka's group coordinator answers it.
5. Commit and abort end to end, with records, the markers going to whichever broker
   leads the partition: read_committed reads the committed transactions' records only,
   read_uncommitted every record; with aiokafka's transactional producer too.
6. Consume-transform-produce with send_offsets_to_transaction (AddOffsetsToTxn and the
   group's TxnOffsetCommit), some transactions aborted and replayed: the output holds
   each input once, and the committed offsets are the input's ends.
7. The coordinator SIGKILLed with a transaction open: the new one loads the id, a new
   producer fences the old one (the open transaction aborted) and commits its own, and
   read_committed reads exactly the committed transactions.
8. DescribeProducers (kafka-transactions describe-producers): a partition's replicas name
   an idempotent producer and a transactional one, with their ids, epochs and last
   sequences, and where the open transaction began (-1 for the idempotent one, and for
   the transactional one once its commit's marker is in); raw, through
   `replog transactions describe-producers --json` and kafka-python's describe_producers
   alike. Followers answer as the leader does (as in Kafka); a broker holding no replica
   answers NOT_LEADER_OR_FOLLOWER, an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidProducerEpoch, ProducerFenced
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition

from spark_replica.wire.schema import Data
from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    FIND_COORDINATOR,
    POLL_S,
    SOCKET_TIMEOUT_S,
    ask,
    coordinator_of,
    leader_of,
    make_topic,
    served_versions,
    wait_for_topic,
)
from tests.support import FAST_REPLICATION, BrokerFactory, eventually, module_brokers, replog, run

pytestmark = pytest.mark.slow

# Few partitions keep the topic's creation and loads quick; Kafka's rule is the same.
TRANSACTION_PARTITIONS = 5
TRANSACTION_TIMEOUT_MS = 60_000
INIT_PRODUCER_ID, END_TXN = 22, 26
ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT = 25, 28
GROUP_KEY_TYPE = 0
# What a group coordinator answers while its offsets partition is not ready yet.
NOT_YET = {14, 15, 16}
NOT_COORDINATOR = 16
INVALID_PRODUCER_EPOCH, INVALID_TRANSACTION_TIMEOUT, PRODUCER_FENCED = 47, 50, 90
ADD_PARTITIONS_TO_TXN = 24
DESCRIBE_PRODUCERS = 61
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 3, 6
NO_TXN_OFFSET = -1
# transaction.max.timeout.ms's default.
MAX_TIMEOUT_MS = 900_000
# How often the coordinators look for transactions past their timeout, and the timeout of
# the one left open here.
SWEEP_MS, SHORT_TIMEOUT_MS = 300, 1_000
# Partitions enough that every broker leads one (leaders are spread over the brokers).
SPREAD_PARTITIONS = 6
RECORDS_PER_TRANSACTION = 60
CTP_RECORDS = 1_200  # a multiple of SPREAD_PARTITIONS
# The codes a fenced producer reports: librdkafka's own, and the brokers' two.
FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("transaction-coordinator"),
        3,
        **FAST_REPLICATION,
        **{
            "transaction.state.log.num.partitions": str(TRANSACTION_PARTITIONS),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(SWEEP_MS),
        },
    ) as brokers:
        yield brokers


def transactional_producer(cluster: BrokerFactory, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )


def transactions_cli(cluster: BrokerFactory, *args: str) -> Any:
    done = replog("transactions", *args, "--bootstrap-server", cluster.kafka_bootstrap(), "--json")
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def init_producer_id(
    cluster: BrokerFactory, broker_id: int, transactional_id: str, timeout_ms: int
) -> Data:
    body = Data(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms)
    return ask(cluster, broker_id, INIT_PRODUCER_ID, 4, body)


def fenced_error(attempt: Callable[[], object]) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        attempt()
    error = raised.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def test_a_second_producer_fences_the_first(cluster: BrokerFactory) -> None:
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    transactional_id = f"tx-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 1)
    first = transactional_producer(cluster, transactional_id)
    first.init_transactions(CLIENT_TIMEOUT_S)
    coordinator = coordinator_of(cluster, transactional_id)
    described = transactions_cli(cluster, "describe", "--transactional-id", transactional_id)
    assert described["state"] == "Empty"
    assert described["coordinator"] == coordinator
    assert described["producer_epoch"] == 0
    assert described["partitions"] == []
    assert described["start_time_ms"] is None
    producer_id = described["producer_id"]
    assert producer_id >= 0

    second = transactional_producer(cluster, transactional_id)
    second.init_transactions(CLIENT_TIMEOUT_S)
    after = transactions_cli(cluster, "describe", "--transactional-id", transactional_id)
    assert (after["producer_id"], after["producer_epoch"]) == (producer_id, 1)

    first.begin_transaction()

    def send_and_commit() -> None:
        first.produce(topic, b"from the fenced producer")
        first.commit_transaction(CLIENT_TIMEOUT_S)

    error = fenced_error(send_and_commit)
    assert error.code() in FENCED_CODES, error
    still = transactions_cli(cluster, "describe", "--transactional-id", transactional_id)
    assert (still["producer_epoch"], still["state"], still["partitions"]) == (1, "Empty", [])

    listed = transactions_cli(cluster, "list")
    assert {
        "transactional_id": transactional_id,
        "coordinator": coordinator,
        "producer_id": producer_id,
        "state": "Empty",
    } in listed
    assert transactions_cli(cluster, "list", "--state", "Ongoing") == [
        entry for entry in listed if entry["state"] == "Ongoing"
    ]


def test_aiokafka_transactional_producer_is_fenced(cluster: BrokerFactory) -> None:
    topic = f"aio-fenced-{uuid.uuid4().hex[:8]}"
    transactional_id = f"aio-tx-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 1)

    async def scenario() -> None:
        def producer() -> AIOKafkaProducer:
            return AIOKafkaProducer(
                bootstrap_servers=cluster.kafka_bootstrap(),
                transactional_id=transactional_id,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                request_timeout_ms=30_000,
            )

        first, second = producer(), producer()
        await first.start()
        try:
            await second.start()
            try:
                with pytest.raises((ProducerFenced, InvalidProducerEpoch)):
                    async with first.transaction():
                        await first.send_and_wait(topic, b"from the fenced producer")
            finally:
                await second.stop()
        finally:
            await first.stop()

    run(scenario(), timeout_s=CLIENT_TIMEOUT_S * 2)
    described = transactions_cli(cluster, "describe", "--transactional-id", transactional_id)
    assert (described["producer_epoch"], described["state"]) == (1, "Empty")


def test_only_the_coordinator_answers_and_old_versions_hear_fenced_as_a_stale_epoch(
    cluster: BrokerFactory,
) -> None:
    transactional_id = f"raw-{uuid.uuid4().hex[:8]}"
    coordinator = coordinator_of(cluster, transactional_id)
    elsewhere = next(b for b in cluster.brokers if b != coordinator)
    refused = init_producer_id(cluster, elsewhere, transactional_id, TRANSACTION_TIMEOUT_MS)
    assert refused.error_code == NOT_COORDINATOR
    too_long = init_producer_id(cluster, coordinator, transactional_id, MAX_TIMEOUT_MS + 1)
    assert too_long.error_code == INVALID_TRANSACTION_TIMEOUT

    first = init_producer_id(cluster, coordinator, transactional_id, TRANSACTION_TIMEOUT_MS)
    second = init_producer_id(cluster, coordinator, transactional_id, TRANSACTION_TIMEOUT_MS)
    assert (first.error_code, second.error_code) == (0, 0)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    stale = Data(
        transactional_id=transactional_id,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        committed=True,
    )
    assert ask(cluster, coordinator, END_TXN, 1, stale).error_code == INVALID_PRODUCER_EPOCH
    assert ask(cluster, coordinator, END_TXN, 3, stale).error_code == PRODUCER_FENCED


def add_partition(
    cluster: BrokerFactory,
    broker_id: int,
    transactional_id: str,
    producer: Data,
    tp: tuple[str, int],
) -> int:
    topic, partition = tp
    body = Data(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer.producer_id,
        v3_and_below_producer_epoch=producer.producer_epoch,
        v3_and_below_topics=[Data(name=topic, partitions=[partition])],
    )
    answer = ask(cluster, broker_id, ADD_PARTITIONS_TO_TXN, 3, body)
    (result,) = answer.results_by_topic_v3_and_below
    (partition_result,) = result.results_by_partition
    return int(partition_result.partition_error_code)


def led_by(cluster: BrokerFactory, topic: str, broker_id: int) -> int:
    """A partition of `topic` whose leader is `broker_id`."""
    metadata = wait_for_topic(cluster.kafka_bootstrap(), topic, SPREAD_PARTITIONS)
    led = [p.id for p in metadata.topics[topic].partitions.values() if p.leader == broker_id]
    assert led, f"broker {broker_id} leads no partition of {topic}"
    return led[0]


def end_offset(cluster: BrokerFactory, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap(), "group.id": "watermarks"})
    try:
        _, high = consumer.get_watermark_offsets(
            KafkaTopicPartition(topic, partition), timeout=SOCKET_TIMEOUT_S
        )
    finally:
        consumer.close()
    return int(high)


def state_of(cluster: BrokerFactory, transactional_id: str) -> Any:
    return transactions_cli(cluster, "describe", "--transactional-id", transactional_id)


def test_ended_and_timed_out_transactions_complete_with_their_markers(
    cluster: BrokerFactory,
) -> None:
    """Transactions without records, on a partition led by their coordinator: the marker
    is appended there, and the transaction completes; one left open past its timeout is
    aborted by the coordinator's sweep, its producer fenced."""
    topic = f"markers-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, SPREAD_PARTITIONS)

    committed_id = f"commit-{uuid.uuid4().hex[:8]}"
    coordinator = coordinator_of(cluster, committed_id)
    partition = led_by(cluster, topic, coordinator)
    producer = init_producer_id(cluster, coordinator, committed_id, TRANSACTION_TIMEOUT_MS)
    assert add_partition(cluster, coordinator, committed_id, producer, (topic, partition)) == 0
    ongoing = state_of(cluster, committed_id)
    assert ongoing["state"] == "Ongoing"
    assert ongoing["partitions"] == [{"topic": topic, "partition": partition}]
    assert ongoing["start_time_ms"] is not None
    end = Data(
        transactional_id=committed_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        committed=True,
    )
    assert ask(cluster, coordinator, END_TXN, 3, end).error_code == 0
    eventually(
        lambda: state_of(cluster, committed_id)["state"] == "CompleteCommit", "the commit completes"
    )
    assert end_offset(cluster, topic, partition) == 1  # the COMMIT marker

    aborted_id = f"abort-{uuid.uuid4().hex[:8]}"
    coordinator = coordinator_of(cluster, aborted_id)
    partition = led_by(cluster, topic, coordinator)
    before = end_offset(cluster, topic, partition)
    producer = init_producer_id(cluster, coordinator, aborted_id, SHORT_TIMEOUT_MS)
    assert add_partition(cluster, coordinator, aborted_id, producer, (topic, partition)) == 0
    done = eventually(
        lambda: (state := state_of(cluster, aborted_id))["state"] == "CompleteAbort" and state,
        "the timed-out transaction is aborted",
    )
    assert done["producer_epoch"] == producer.producer_epoch + 1
    assert end_offset(cluster, topic, partition) == before + 1  # the ABORT marker
    late = Data(
        transactional_id=aborted_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        committed=True,
    )
    assert ask(cluster, coordinator, END_TXN, 3, late).error_code == PRODUCER_FENCED


def group_coordinator_of(cluster: BrokerFactory, group: str) -> int:
    """The broker FindCoordinator names for the group, once one names it."""
    body = Data(key=group, key_type=GROUP_KEY_TYPE)

    def named() -> int | None:
        answer = ask(cluster, next(iter(cluster.brokers)), FIND_COORDINATOR, 3, body)
        return int(answer.node_id) if answer.error_code == 0 else None

    return eventually(named, f"a coordinator for group {group}")


def test_a_timed_out_transaction_s_producer_is_fenced_at_the_group_coordinator_too(
    cluster: BrokerFactory,
) -> None:
    """A transaction that added its group's offsets (AddOffsetsToTxn) and outlived its
    timeout is aborted by the coordinator with the epoch bumped; the ABORT marker lands
    in the group's offsets partition, so the old producer's TxnOffsetCommit is answered
    at once, INVALID_PRODUCER_EPOCH (a fenced producer to librdkafka), and its
    AddOffsetsToTxn PRODUCER_FENCED."""
    topic = f"late-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 1)
    group, transactional_id = f"late-{uuid.uuid4().hex[:8]}", f"late-{uuid.uuid4().hex[:8]}"
    group_coordinator = group_coordinator_of(cluster, group)
    coordinator = coordinator_of(cluster, transactional_id)
    producer = init_producer_id(cluster, coordinator, transactional_id, SHORT_TIMEOUT_MS)
    add_offsets = Data(
        transactional_id=transactional_id,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        group_id=group,
    )
    assert ask(cluster, coordinator, ADD_OFFSETS_TO_TXN, 3, add_offsets).error_code == 0
    done = eventually(
        lambda: (
            (state := state_of(cluster, transactional_id))["state"] == "CompleteAbort" and state
        ),
        "the timed-out transaction is aborted",
    )
    assert done["producer_epoch"] == producer.producer_epoch + 1
    commit = Data(
        transactional_id=transactional_id,
        group_id=group,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            Data(
                name=topic,
                partitions=[
                    Data(
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )

    def answered() -> list[int] | None:
        answer = ask(cluster, group_coordinator, TXN_OFFSET_COMMIT, 3, commit)
        codes = [int(p.error_code) for t in answer.topics for p in t.partitions]
        return None if set(codes) & NOT_YET else codes

    assert eventually(answered, "the group coordinator answers") == [INVALID_PRODUCER_EPOCH]
    late = ask(cluster, coordinator, ADD_OFFSETS_TO_TXN, 3, add_offsets)
    assert late.error_code == PRODUCER_FENCED


def read_values(cluster: BrokerFactory, topic: str, isolation: str, count: int) -> list[bytes]:
    """Every value of every partition of `topic` up to its end (for read_committed, the
    LSO), sorted; each end must be reached within the deadline, with at least `count`
    values read in all."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    values: list[bytes] = []
    ended: set[int] = set()
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(SPREAD_PARTITIONS)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=POLL_S):
                error = message.error()
                if error is None:
                    values.append(message.value())
                elif error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                else:
                    raise KafkaException(error)
            if len(ended) == SPREAD_PARTITIONS and len(values) >= count:
                return sorted(values)
        raise AssertionError(f"{topic} not read to its end: {len(values)} of {count} values")
    finally:
        consumer.close()


def test_committed_records_are_read_and_aborted_ones_are_not(cluster: BrokerFactory) -> None:
    """Every partition gets records of each transaction, so that its markers go both to
    the coordinator's own partitions and to other brokers'."""
    topic = f"committed-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, SPREAD_PARTITIONS)
    producer = transactional_producer(cluster, f"tx-{uuid.uuid4().hex[:8]}")
    producer.init_transactions(CLIENT_TIMEOUT_S)
    outcomes = ("committed", "aborted", "committed-again")
    for outcome in outcomes:
        producer.begin_transaction()
        for i in range(RECORDS_PER_TRANSACTION):
            producer.produce(topic, f"{outcome}-{i:03}".encode(), partition=i % SPREAD_PARTITIONS)
        producer.flush(CLIENT_TIMEOUT_S)
        if outcome == "aborted":
            producer.abort_transaction(CLIENT_TIMEOUT_S)
        else:
            producer.commit_transaction(CLIENT_TIMEOUT_S)
    written = {
        outcome: [f"{outcome}-{i:03}".encode() for i in range(RECORDS_PER_TRANSACTION)]
        for outcome in outcomes
    }
    expected = sorted(written["committed"] + written["committed-again"])
    assert read_values(cluster, topic, "read_committed", len(expected)) == expected
    everything = sorted(value for values in written.values() for value in values)
    assert read_values(cluster, topic, "read_uncommitted", len(everything)) == everything


def test_aiokafka_transactions_commit_and_abort(cluster: BrokerFactory) -> None:
    topic = f"aio-committed-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, SPREAD_PARTITIONS)
    sent: dict[str, list[bytes]] = {}

    async def scenario() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap(),
            transactional_id=f"aio-{uuid.uuid4().hex[:8]}",
            request_timeout_ms=30_000,
        )
        await producer.start()
        try:
            for outcome in ("committed", "aborted"):
                values = sent[outcome] = [
                    f"aio-{outcome}-{i:03}".encode() for i in range(RECORDS_PER_TRANSACTION)
                ]
                await producer.begin_transaction()
                for i, value in enumerate(values):
                    await producer.send(topic, value, partition=i % SPREAD_PARTITIONS)
                if outcome == "committed":
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    run(scenario(), timeout_s=CLIENT_TIMEOUT_S * 2)
    committed = sorted(sent["committed"])
    assert read_values(cluster, topic, "read_committed", len(committed)) == committed
    everything = sorted(sent["committed"] + sent["aborted"])
    assert read_values(cluster, topic, "read_uncommitted", len(everything)) == everything


def test_consume_transform_produce_commits_its_offsets_in_its_transactions(
    cluster: BrokerFactory,
) -> None:
    """Kafka's exactly-once loop: each batch read from the input is written transformed
    to the output and its offsets sent into the same transaction. Every third
    transaction is aborted and the consumer rewound to the group's committed offsets, as
    such loops do: the output read with read_committed holds each input record once, and
    the group's committed offsets are the input's ends."""
    source, sink = f"ctp-in-{uuid.uuid4().hex[:8]}", f"ctp-out-{uuid.uuid4().hex[:8]}"
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, source, SPREAD_PARTITIONS)
    make_topic(cluster, sink, SPREAD_PARTITIONS)
    inputs = [f"input-{i:04}".encode() for i in range(CTP_RECORDS)]
    plain = Producer({"bootstrap.servers": cluster.kafka_bootstrap(), "acks": "all"})
    for i, value in enumerate(inputs):
        plain.produce(source, value, partition=i % SPREAD_PARTITIONS)
    assert plain.flush(CLIENT_TIMEOUT_S) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    partitions = [KafkaTopicPartition(source, p) for p in range(SPREAD_PARTITIONS)]
    producer = transactional_producer(cluster, f"ctp-{uuid.uuid4().hex[:8]}")
    producer.init_transactions(CLIENT_TIMEOUT_S)
    try:
        consumer.assign(partitions)
        transactions = 0
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while sum(max(tp.offset, 0) for tp in consumer.committed(partitions, 10)) < CTP_RECORDS:
            assert time.monotonic() < deadline, "the input was not all processed in time"
            batch = [m for m in consumer.consume(100, POLL_S) if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, b"out-" + message.value(), partition=message.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), CLIENT_TIMEOUT_S
            )
            transactions += 1
            if transactions % 3 == 0:
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                for tp in consumer.committed(partitions, 10):
                    consumer.seek(KafkaTopicPartition(source, tp.partition, max(tp.offset, 0)))
            else:
                producer.commit_transaction(CLIENT_TIMEOUT_S)
        assert transactions >= 3, "no transaction was aborted"
        committed = consumer.committed(partitions, 10)
    finally:
        consumer.close()
    expected = sorted(b"out-" + value for value in inputs)
    assert read_values(cluster, sink, "read_committed", len(expected)) == expected
    ends = [CTP_RECORDS // SPREAD_PARTITIONS] * SPREAD_PARTITIONS
    assert [tp.offset for tp in sorted(committed, key=lambda tp: tp.partition)] == ends


def producers_of(cluster: BrokerFactory, broker_id: int, topic: str, partition: int) -> Data:
    """The partition's DescribeProducers answer from one broker, by a raw request."""
    body = Data(topics=[Data(name=topic, partition_indexes=[partition])])
    answer = ask(cluster, broker_id, DESCRIBE_PRODUCERS, 0, body)
    ((answered,),) = [topic_answer.partitions for topic_answer in answer.topics]
    assert answered.partition_index == partition
    return answered


Producers = dict[int, tuple[int, int, int, int]]


def producers_by_id(answered: Data) -> Producers:
    """(epoch, last sequence, coordinator epoch, open transaction's first offset) per
    producer id of a partition's answer."""
    assert answered.error_code == 0, answered
    return {
        p.producer_id: (
            p.producer_epoch,
            p.last_sequence,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in answered.active_producers
    }


def test_describe_producers_names_idempotent_and_transactional_producers(
    cluster: BrokerFactory,
) -> None:
    topic = f"producers-{uuid.uuid4().hex[:8]}"
    transactional_id = f"described-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 1)
    started_ms = int(time.time() * 1000)
    idempotent = Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap(), "enable.idempotence": True}
    )
    for i in range(3):
        idempotent.produce(topic, f"plain-{i}".encode(), partition=0)
    assert idempotent.flush(CLIENT_TIMEOUT_S) == 0
    transactional = transactional_producer(cluster, transactional_id)
    transactional.init_transactions(CLIENT_TIMEOUT_S)
    transactional.begin_transaction()
    offsets: list[int] = []
    for i in range(2):
        transactional.produce(
            topic,
            f"open-{i}".encode(),
            partition=0,
            on_delivery=lambda error, message: offsets.append(message.offset()),
        )
    assert transactional.flush(CLIENT_TIMEOUT_S) == 0
    assert sorted(offsets) == [3, 4]  # after the idempotent producer's three

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=int(CLIENT_TIMEOUT_S * 1000)
    )
    try:
        described = admin.describe_transactions([transactional_id])[transactional_id]
        txn_pid = described.producer_id
        leader = leader_of(cluster.kafka_bootstrap(), topic, 0)
        answered = producers_of(cluster, leader, topic, 0)
        found = producers_by_id(answered)
        assert len(found) == 2, found
        (idempotent_pid,) = set(found) - {txn_pid}
        assert found == {txn_pid: (0, 1, -1, 3), idempotent_pid: (0, 2, -1, NO_TXN_OFFSET)}
        assert all(p.last_timestamp >= started_ms for p in answered.active_producers)

        by_cli = replog(
            "transactions", "describe-producers", "--topic", topic, "--partition", "0",
            "--bootstrap-server", cluster.kafka_bootstrap(), "--json",
        )  # fmt: skip
        assert by_cli.returncode == 0, by_cli.stderr.decode()
        assert json.loads(by_cli.stdout) == [
            {
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "latest_coordinator_epoch": p.coordinator_epoch,
                "last_sequence": p.last_sequence,
                "last_timestamp": p.last_timestamp,
                "current_transaction_start_offset": (
                    None
                    if p.current_txn_start_offset == NO_TXN_OFFSET
                    else p.current_txn_start_offset
                ),
            }
            for p in sorted(answered.active_producers, key=lambda p: p.producer_id)
        ]
        tp = KafkaPythonTopicPartition(topic, 0)
        by_kafka = admin.describe_producers([tp])[tp].active_producers
        assert {
            p.producer_id: (
                p.producer_epoch,
                p.last_sequence,
                p.coordinator_epoch,
                p.current_transaction_start_offset,
            )
            for p in by_kafka
        } == found
        for follower in (broker for broker in cluster.brokers if broker != leader):
            eventually(
                lambda follower=follower: (
                    producers_by_id(producers_of(cluster, follower, topic, 0)) == found
                ),
                f"follower {follower} knows the producers the leader knows",
            )
            by_follower = replog(
                "transactions", "describe-producers", "--topic", topic, "--partition", "0",
                "--broker-id", str(follower),
                "--bootstrap-server", cluster.kafka_bootstrap(), "--json",
            )  # fmt: skip
            assert by_follower.returncode == 0, by_follower.stderr.decode()
            assert {
                p["producer_id"]: (p["producer_epoch"], p["last_sequence"])
                for p in json.loads(by_follower.stdout)
            } == {pid: (epoch, sequence) for pid, (epoch, sequence, _, _) in found.items()}
    finally:
        admin.close()

    transactional.commit_transaction(CLIENT_TIMEOUT_S)

    def committed() -> Producers | None:
        now = producers_by_id(producers_of(cluster, leader, topic, 0))
        return now if now[txn_pid][3] == NO_TXN_OFFSET else None

    after = eventually(committed, "the commit's marker ends the open transaction")
    epoch, last_sequence, coordinator_epoch, _ = after[txn_pid]
    assert (epoch, last_sequence) == (0, 1) and coordinator_epoch >= 0
    assert after[idempotent_pid] == found[idempotent_pid]
    idempotent.close()
    transactional.close()


def test_describe_producers_is_answered_by_every_replica_alone(cluster: BrokerFactory) -> None:
    topic = f"producers-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 1, rf=2)
    leader = leader_of(cluster.kafka_bootstrap(), topic, 0)
    broker = cluster.brokers[leader]
    assert served_versions((broker.host, broker.kafka_port))[DESCRIBE_PRODUCERS] == (0, 0)
    metadata = wait_for_topic(cluster.kafka_bootstrap(), topic, 1)
    holders = set(metadata.topics[topic].partitions[0].replicas)
    assert len(holders) == 2 and leader in holders
    for broker_id in cluster.brokers:
        answered = producers_of(cluster, broker_id, topic, 0)
        expected = 0 if broker_id in holders else NOT_LEADER_OR_FOLLOWER
        assert (answered.error_code, answered.active_producers) == (expected, []), broker_id
    for unknown_topic, partition in ((topic, 5), (f"never-made-{uuid.uuid4().hex[:8]}", 0)):
        answered = producers_of(cluster, leader, unknown_topic, partition)
        assert answered.error_code == UNKNOWN_TOPIC_OR_PARTITION, answered


def test_a_new_coordinator_aborts_the_open_transaction_of_a_killed_one(
    cluster: BrokerFactory,
) -> None:
    """The coordinator is SIGKILLed with a transaction open. Its partition's new leader
    loads the id; a new producer of the id fences the old one, which aborts the open
    transaction (its markers going to whichever brokers lead the partitions now), and
    commits a transaction of its own: read_committed reads the first and last
    transactions' records, none of the one left open. Last in the module: the killed
    broker is started again, but its partitions' leaders have moved."""
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    transactional_id = f"failover-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, SPREAD_PARTITIONS)
    coordinator = coordinator_of(cluster, transactional_id)

    def transaction(producer: Producer, name: str) -> list[bytes]:
        values = [f"{name}-{i:03}".encode() for i in range(RECORDS_PER_TRANSACTION)]
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % SPREAD_PARTITIONS)
        producer.flush(CLIENT_TIMEOUT_S)
        return values

    first = transactional_producer(cluster, transactional_id)
    first.init_transactions(CLIENT_TIMEOUT_S)
    before = transaction(first, "before")
    first.commit_transaction(CLIENT_TIMEOUT_S)
    transaction(first, "open")
    cluster.brokers[coordinator].kill()
    try:
        second = transactional_producer(cluster, transactional_id)
        second.init_transactions(CLIENT_TIMEOUT_S)
        after = transaction(second, "after")
        second.commit_transaction(CLIENT_TIMEOUT_S)
        assert coordinator_of(cluster, transactional_id) != coordinator
        expected = sorted(before + after)
        assert read_values(cluster, topic, "read_committed", len(expected)) == expected
        described = state_of(cluster, transactional_id)
        assert (described["state"], described["producer_epoch"]) == ("CompleteCommit", 2)
    finally:
        cluster.start(coordinator)
