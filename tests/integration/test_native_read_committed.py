"""read_committed on replog's own listener: the native consumer, `replog consume` and
version 0 clients, through a real broker.

1. A topic without transactions reads the same under read_committed as under
   read_uncommitted, to the same end offset, with the consumer and with the CLI.
2. A log holding committed, aborted and open transactions (written into the stopped
   broker's log through the log's own classes, as tests/kafka/test_read_committed.py
   does until a coordinator can write them) reads under read_committed only the
   committed records, up to the last stable offset, and everything but the markers
   under read_uncommitted; a version 0 Fetch and ListOffsets (an older client) are
   answered as before: read_uncommitted, up to the HW.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_replica.client import Cluster, Producer
from spark_replica.records import iter_batches
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.wire.native.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.kafka.test_read_committed import transactions, write_offline
from tests.support import (
    BrokerFactory,
    create_topic,
    module_brokers,
    native_read_to_end,
    replog,
    run,
)
from tests.support_wire import RawConnection

pytestmark = pytest.mark.slow

PLAIN_RECORDS = 300
COMMITTED = [b"plain-0", b"plain-1", b"committed-0", b"committed-1", b"plain-2"]
EVERYTHING = [
    b"plain-0",
    b"plain-1",
    b"committed-0",
    b"aborted-0",
    b"aborted-1",
    b"committed-1",
    b"plain-2",
    b"open-0",
    b"plain-3",
]
LAST_STABLE_OFFSET, HIGH_WATERMARK = 9, 11


@pytest.fixture(scope="module")
def one_broker(
    zookeeper: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("native-read-committed"),
    ) as brokers:
        yield brokers


def consume_cli(broker: str, topic: str, isolation: str, count: int) -> list[bytes]:
    done = replog(
        "consume",
        topic,
        "--from-beginning",
        "--isolation-level",
        isolation,
        "--max-messages",
        str(count),
        "--timeout",
        "5",
        "--bootstrap",
        broker,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_topic_without_transactions_reads_whole_under_read_committed(
    one_broker: BrokerFactory,
) -> None:
    bootstrap = one_broker.bootstrap
    sent = [f"v{i}".encode() for i in range(PLAIN_RECORDS)]

    async def produce() -> None:
        await create_topic(bootstrap, "plain")
        cluster = Cluster(bootstrap)
        try:
            await Producer(cluster).send_records("plain", sent, partition=0)
        finally:
            await cluster.close()

    run(produce())
    assert run(native_read_to_end(bootstrap, "plain", "read_committed")) == (sent, PLAIN_RECORDS)
    assert run(native_read_to_end(bootstrap, "plain", "read_uncommitted")) == (sent, PLAIN_RECORDS)
    address = one_broker.brokers[1].address
    assert consume_cli(address, "plain", "read_committed", PLAIN_RECORDS) == sent


@pytest.fixture(scope="module")
def transactions_topic(one_broker: BrokerFactory) -> str:
    """A topic whose partition 0 holds tests/kafka/test_read_committed.py's transactions."""
    topic = "transactions"
    run(create_topic(one_broker.bootstrap, topic))
    broker = one_broker.brokers[1]
    broker.kill()
    write_offline(broker.log_dir / f"{topic}-0", transactions)
    broker.start()
    run(native_read_to_end(one_broker.bootstrap, topic, "read_uncommitted"))  # served again
    return topic


def test_read_committed_stops_at_the_lso_and_drops_aborted_records(
    one_broker: BrokerFactory, transactions_topic: str
) -> None:
    topic = transactions_topic
    broker = one_broker.brokers[1]
    bootstrap = one_broker.bootstrap
    committed = run(native_read_to_end(bootstrap, topic, "read_committed"))
    assert committed == (COMMITTED, LAST_STABLE_OFFSET)
    everything = run(native_read_to_end(bootstrap, topic, "read_uncommitted"))
    assert everything == (EVERYTHING, HIGH_WATERMARK)
    assert consume_cli(broker.address, topic, "read_committed", 100) == COMMITTED
    assert consume_cli(broker.address, topic, "read_uncommitted", 100) == EVERYTHING


def test_a_version_0_client_is_served_read_uncommitted_as_before(
    one_broker: BrokerFactory, transactions_topic: str
) -> None:
    """RawConnection sends version 0 frames and decodes the answers at version 0, refusing
    any byte left over: an older client's view of the transactions' partition."""
    topic = transactions_topic
    with RawConnection(one_broker.bootstrap[0]) as conn:
        fetch = FetchRequest(500, 1, 1 << 20, [FetchTopic(topic, [FetchPartition(0, 0, 1 << 20)])])
        answer = conn.call(fetch).topics[0].partitions[0]
        latest = conn.call(
            ListOffsetsRequest(
                [ListOffsetsTopic(topic, [ListOffsetsPartition(0, LATEST_TIMESTAMP)])]
            )
        )
    assert answer.error_code == 0 and answer.high_watermark == HIGH_WATERMARK
    assert answer.last_stable_offset == -1  # not in version 0's answer
    assert sum(1 for _ in iter_batches(bytes(answer.records))) == 9  # markers included
    assert latest.topics[0].partitions[0].offset == HIGH_WATERMARK
