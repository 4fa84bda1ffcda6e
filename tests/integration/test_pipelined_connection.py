"""A connection's requests overlap and its answers leave in request order (issue 25).

Real brokers, raw sockets: a client sends several requests before reading any answer, as
Kafka's producers do. An acks=all produce whose follower is paused (SIGSTOP) waits for
the HW; the requests behind it are read and handled meanwhile, yet their answers come
after its own. Each test would fail on a broker that serves a connection one request at
a time (the request behind the wait would not be handled) or that answers out of order.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from spark_replica.records import build_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native import ApiKey, ListOffsetsRequest, MetadataRequest, ProduceRequest
from spark_replica.wire.native.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from spark_replica.wire.native.produce import ProducePartition, ProduceResponse, ProduceTopic
from tests.support import BrokerFactory, create, leadership, run, start_cluster, wait_until
from tests.support_wire import RawConnection, body_of

pytestmark = pytest.mark.slow

WAITING = "pipelined-waiting"  # replication factor 2: an acks=all produce waits for the follower
QUICK = "pipelined-quick"  # replication factor 1, a partition on each broker
# Long enough that a paused follower stays in the ISR for the whole test: the acks=all
# produce waits until it is resumed, not until the ISR shrinks.
SLOW_ISR_SHRINK = {"replica.lag.time.max.ms": "120000"}
ACKS_ALL, ACKS_LEADER = -1, 1
PRODUCE_TIMEOUT_MS = 60_000
# How long a request that must not be handled yet is watched for.
NOT_YET_S = 1.5


def _produce(topic: str, partition: int, value: str, acks: int) -> bytes:
    request = ProduceRequest(
        acks,
        PRODUCE_TIMEOUT_MS,
        [ProduceTopic(topic, [ProducePartition(partition, build_batch([value]))])],
    )
    return body_of(request)


def _latest(conn: RawConnection, topic: str, partition: int) -> int:
    partitions = [ListOffsetsPartition(partition, LATEST_TIMESTAMP)]
    response: ListOffsetsResponse = conn.call(
        ListOffsetsRequest([ListOffsetsTopic(topic, partitions)])
    )
    result = response.topics[0].partitions[0]
    assert result.error_code == 0, result
    return result.offset


def _read_produce_answer(conn: RawConnection, correlation_id: int) -> int:
    """The next answer, which must be the produce `correlation_id`'s success: its offset."""
    answer = conn.read_answer()
    assert answer.correlation_id == correlation_id
    assert answer.error_code == 0, answer.error_message
    result = ProduceResponse.read(answer.body).topics[0].partitions[0]
    assert result.error_code == 0, result.error_message
    return result.base_offset


def _nothing_to_read(conn: RawConnection) -> bool:
    """No answer byte has arrived on the connection (checked without blocking)."""
    conn.sock.setblocking(False)
    try:
        return not conn.sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        conn.sock.setblocking(True)
        conn.sock.settimeout(30)


class Pipeline:
    """Two brokers; WAITING's partition 0 led by `leader` with its follower `follower`;
    `quick` the partition of QUICK that `leader` holds."""

    def __init__(self, brokers: BrokerFactory) -> None:
        run(create(brokers.bootstrap, WAITING, partitions=1, rf=2))
        run(create(brokers.bootstrap, QUICK, partitions=2, rf=1))

        def settled() -> bool:
            waiting = run(leadership(brokers.bootstrap, WAITING))
            quick = run(leadership(brokers.bootstrap, QUICK))
            return (
                len(waiting[0]["isr"]) == 2
                and waiting[0]["leader"] in (1, 2)
                and all(p["leader"] in (1, 2) for p in quick)
            )

        wait_until(settled, "both topics have leaders and a full ISR", timeout_s=30)
        waiting = run(leadership(brokers.bootstrap, WAITING))[0]
        quick = run(leadership(brokers.bootstrap, QUICK))
        leader_id = int(waiting["leader"])
        self.leader = brokers.brokers[leader_id]
        self.follower = brokers.brokers[3 - leader_id]
        self.quick = next(int(p["partition"]) for p in quick if p["leader"] == leader_id)
        # Both partitions answer on the leader before anything is timed.
        with self.connect() as conn:
            first = conn.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, "first", ACKS_ALL))
            _read_produce_answer(conn, first)
            _latest(conn, QUICK, self.quick)

    def connect(self) -> RawConnection:
        return RawConnection((self.leader.host, self.leader.port), timeout_s=30)

    @contextmanager
    def follower_paused(self) -> Iterator[BrokerProcess]:
        self.follower.pause()
        try:
            yield self.follower
        finally:
            self.follower.resume()


@pytest.fixture
def pipeline(brokers: BrokerFactory) -> Pipeline:
    start_cluster(brokers, count=2, **SLOW_ISR_SHRINK)
    return Pipeline(brokers)


def test_requests_behind_an_acks_all_wait_are_handled_and_answered_after_it(
    pipeline: Pipeline,
) -> None:
    with pipeline.connect() as conn, pipeline.connect() as observer:
        quick_before = _latest(observer, QUICK, pipeline.quick)
        with pipeline.follower_paused():
            waiting = conn.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, "w", ACKS_ALL))
            quick = conn.send_frame(
                int(ApiKey.PRODUCE), _produce(QUICK, pipeline.quick, "q", ACKS_LEADER)
            )
            metadata = conn.send_frame(int(ApiKey.METADATA), body_of(MetadataRequest(None)))
            # The produce behind the wait is appended while the wait goes on...
            wait_until(
                lambda: _latest(observer, QUICK, pipeline.quick) == quick_before + 1,
                "the request behind the acks=all wait is handled",
                timeout_s=10,
            )
            # ...and neither its answer nor any other leaves before the waiting one's.
            time.sleep(0.2)
            assert _nothing_to_read(conn), "an answer left before the acks=all produce's"
        _read_produce_answer(conn, waiting)
        assert _read_produce_answer(conn, quick) == quick_before
        answer = conn.read_answer()
        assert answer.correlation_id == metadata and answer.error_code == 0


def test_a_connection_has_at_most_five_requests_unanswered(pipeline: Pipeline) -> None:
    with pipeline.connect() as conn, pipeline.connect() as observer:
        quick_before = _latest(observer, QUICK, pipeline.quick)
        with pipeline.follower_paused():
            waiting = [
                conn.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, f"w{i}", ACKS_ALL))
                for i in range(5)
            ]
            sixth = conn.send_frame(
                int(ApiKey.PRODUCE), _produce(QUICK, pipeline.quick, "sixth", ACKS_LEADER)
            )
            deadline = time.monotonic() + NOT_YET_S
            while time.monotonic() < deadline:
                assert _latest(observer, QUICK, pipeline.quick) == quick_before, (
                    "a sixth request was handled while five waited unanswered"
                )
                time.sleep(0.1)
        offsets = [_read_produce_answer(conn, c) for c in waiting]
        assert offsets == sorted(offsets) and len(set(offsets)) == 5
        assert _read_produce_answer(conn, sixth) == quick_before


def test_requests_sent_before_the_client_half_closes_are_all_answered(
    pipeline: Pipeline,
) -> None:
    with pipeline.connect() as conn:
        with pipeline.follower_paused():
            sent = [
                conn.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, f"h{i}", ACKS_ALL))
                for i in range(3)
            ]
            conn.sock.shutdown(socket.SHUT_WR)
        offsets = [_read_produce_answer(conn, c) for c in sent]
        assert offsets == list(range(offsets[0], offsets[0] + 3))
        conn.assert_closed()


def test_a_connection_closed_mid_pipeline_loses_no_acknowledged_record(
    pipeline: Pipeline,
) -> None:
    with pipeline.connect() as observer:
        start = _latest(observer, WAITING, 0)
        quick_before = _latest(observer, QUICK, pipeline.quick)
        conn = pipeline.connect()
        with pipeline.follower_paused():
            sent = [
                conn.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, f"c{i}", ACKS_ALL))
                for i in range(4)
            ]
            conn.send_frame(int(ApiKey.PRODUCE), _produce(QUICK, pipeline.quick, "q", ACKS_LEADER))
            # Handled in order: once the fifth request is, the four before it are appended.
            wait_until(
                lambda: _latest(observer, QUICK, pipeline.quick) == quick_before + 1,
                "the five requests are handled",
                timeout_s=10,
            )
        acknowledged = [_read_produce_answer(conn, c) for c in sent[:2]]
        # Cut the connection with answers still owed (a reset, not an orderly close).
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        assert acknowledged == [start, start + 1]
        # Every record appended, the answered ones included, is committed and stays.
        wait_until(
            lambda: _latest(observer, WAITING, 0) == start + 4,
            "all four appends commit",
            timeout_s=20,
        )
        # The broker serves on, with its request budget given back.
        observer.assert_usable()
        again = observer.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, "after", ACKS_ALL))
        assert _read_produce_answer(observer, again) == start + 4


def test_an_idle_connection_is_reaped_but_not_one_waiting_for_an_answer(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers, count=2, **SLOW_ISR_SHRINK, **{"connections.max.idle.ms": "1000"})
    pipeline = Pipeline(brokers)
    with pipeline.connect() as conn:
        with pipeline.follower_paused():
            waiting = conn.send_frame(int(ApiKey.PRODUCE), _produce(WAITING, 0, "w", ACKS_ALL))
            time.sleep(3.0)  # three idle timeouts, with a request unanswered
        # Answered, not cut off by the reaper while it waited.
        assert conn.read_answer().correlation_id == waiting
        conn.sock.settimeout(10)
        conn.assert_closed()  # idle once answered: reaped
