"""A broker's resources stay bounded whatever its clients do, against real processes.

Each test starts a broker with small limits (so that it is fast), abuses it over raw
sockets the way a careless or hostile client would (too many connections, frames whose
bodies trickle in or never come, frames declared huge), and checks both that the abuse
is cut off and that a normal client is served all along.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.client import Cluster, Consumer, Producer
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.api_versions import ApiVersionsRequest
from spark_replica.wire.native.frames import SIZE, RequestHeader, encode_request
from spark_replica.wire.primitives import Writer
from tests.support import BrokerFactory, create_topic, run

pytestmark = pytest.mark.slow

SOCKET_TIMEOUT_S = 5.0
MIB = 1024 * 1024


def api_versions_frame(correlation_id: int = 1) -> bytes:
    body = Writer()
    ApiVersionsRequest().write(body)
    header = RequestHeader(int(ApiVersionsRequest.API_KEY), 0, correlation_id, "limits")
    return b"".join(bytes(b) for b in encode_request(header, body))


def connect(broker: BrokerProcess, source_ip: str = "127.0.0.1") -> socket.socket:
    """A raw connection from `source_ip` (any 127.x.y.z address is local on Linux)."""
    sock = socket.create_connection(
        (broker.host, broker.port), timeout=SOCKET_TIMEOUT_S, source_address=(source_ip, 0)
    )
    sock.settimeout(SOCKET_TIMEOUT_S)
    return sock


def is_served(sock: socket.socket) -> bool:
    """True if an ApiVersions request on `sock` is answered, False if the broker closed it."""
    try:
        sock.sendall(api_versions_frame())
        prefix = sock.recv(SIZE.size, socket.MSG_WAITALL)
        if len(prefix) < SIZE.size:
            return False
        (size,) = SIZE.unpack(prefix)
        return len(sock.recv(size, socket.MSG_WAITALL)) == size
    except (ConnectionResetError, BrokenPipeError):
        return False


def is_closed_by_broker(sock: socket.socket, within_s: float) -> bool:
    """Wait up to `within_s` for the broker to close `sock` (it sends nothing meanwhile)."""
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def produce_and_consume(broker: BrokerProcess, topic: str, count: int = 5) -> list[bytes | None]:
    """What a normal client gets back after producing `count` records to a new topic."""
    address = (broker.host, broker.port)

    async def scenario() -> list[bytes | None]:
        await create_topic([address], topic, 1)
        cluster = Cluster([address])
        try:
            await Producer(cluster).send_records(topic, [f"r{i}" for i in range(count)])
            consumer = Consumer(cluster)
            consumer.assign([TopicPartition(topic, 0)])
            values: list[bytes | None] = []
            for _ in range(100):
                for chunk in await consumer.poll(max_wait_ms=100):
                    values += chunk.records.column("value").to_pylist()
                if len(values) >= count:
                    break
            return values
        finally:
            await cluster.close()

    return run(scenario(), timeout_s=60)


def expected_values(count: int = 5) -> list[bytes | None]:
    return [f"r{i}".encode() for i in range(count)]


def rss_bytes(broker: BrokerProcess) -> int:
    status = Path(f"/proc/{broker.pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) * 1024


@contextlib.contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


def test_connections_over_the_limits_are_closed(brokers: BrokerFactory) -> None:
    broker = brokers.start(1, **{"max.connections": "16", "max.connections.per.ip": "8"})
    with sockets() as from_one_ip, sockets() as from_others:
        from_one_ip += [connect(broker, "127.0.0.2") for _ in range(9)]
        assert [is_served(s) for s in from_one_ip] == [True] * 8 + [False]
        # Connections the broker may open to itself would count too: at most 8 more fit,
        # and at least the last 2 of these 10 are over the limit.
        from_others += [connect(broker, f"127.0.0.{i}") for i in range(3, 13)]
        served = [is_served(s) for s in from_others]
        accepted = served.count(True)
        assert 6 <= accepted <= 8, served
        assert served == [True] * accepted + [False] * (10 - accepted)
        for sock in from_one_ip:
            sock.close()
        deadline = time.monotonic() + 10
        while True:
            with connect(broker, "127.0.0.2") as again:
                if is_served(again):
                    break
            assert time.monotonic() < deadline, "closed connections never freed their slots"
            time.sleep(0.1)
    assert produce_and_consume(broker, "after-limits") == expected_values()


def produce_frame_head(declared_size: int) -> bytes:
    """The size prefix and request header of a Produce frame of `declared_size` bytes."""
    header = Writer()
    RequestHeader(0, 0, 7, "limits").write(header)
    return SIZE.pack(declared_size) + header.getvalue()


def send_until_stalled(sock: socket.socket, data: memoryview, stall_s: float = 1.0) -> int:
    """Send as much of `data` as the broker takes before it stops reading; bytes sent."""
    sock.settimeout(stall_s)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent : sent + MIB])
    except TimeoutError:
        pass
    return sent


def test_idle_connections_cost_little_memory(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    before = rss_bytes(broker)
    with sockets() as idle:
        idle += [connect(broker, f"127.0.1.{i % 250 + 1}") for i in range(1000)]
        assert is_served(idle[-1])
        grown = rss_bytes(broker) - before
        assert grown < 64 * MIB, f"1000 idle connections took {grown / MIB:.0f} MiB"
        assert produce_and_consume(broker, "beside-idle") == expected_values()


def test_frames_declared_huge_take_memory_only_from_the_queued_budget(
    brokers: BrokerFactory,
) -> None:
    """Four clients each start a 48 MiB request and stop 24 MiB into it: the broker holds
    what has arrived, never more than the 64 MiB budget however much is declared, and
    what is left of the budget serves a normal client (partial frames never take all of
    it)."""
    budget = 64 * MIB
    broker = brokers.start(
        1,
        **{"queued.max.request.bytes": str(budget), "socket.request.max.bytes": str(48 * MIB)},
    )
    declared = 48 * MIB
    body = memoryview(bytes(24 * MIB))
    before = rss_bytes(broker)
    with sockets() as senders:
        for _ in range(4):
            sock = connect(broker)
            sock.sendall(produce_frame_head(declared))
            send_until_stalled(sock, body)
            senders.append(sock)
        time.sleep(0.5)
        grown = rss_bytes(broker) - before
        assert grown < budget + 16 * MIB, f"the broker grew by {grown / MIB:.0f} MiB"
        assert produce_and_consume(broker, "beside-huge") == expected_values()


def is_open(sock: socket.socket) -> bool:
    """True while the broker has not closed `sock` (never blocks)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return True
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except ConnectionResetError:
        return False


def test_idle_connections_are_closed_after_connections_max_idle_ms(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1, **{"connections.max.idle.ms": "1000"})
    with sockets() as idle:
        idle += [connect(broker), connect(broker)]
        assert is_served(idle[0])  # idle after an answer, or idle from the start
        assert all(is_closed_by_broker(sock, within_s=10) for sock in idle)
    assert produce_and_consume(broker, "after-idle") == expected_values()


def test_slow_loris_senders_are_closed_after_the_read_deadline(brokers: BrokerFactory) -> None:
    """100 connections that start a request and trickle one byte at a time are closed
    once the request has taken longer than socket.request.read.timeout.ms to arrive; one
    that sends whole requests slowly is kept; a normal client is served meanwhile."""
    broker = brokers.start(1, **{"socket.request.read.timeout.ms": "1500"})
    trickle = produce_frame_head(1000)
    with sockets() as slow, connect(broker) as patient:
        slow += [connect(broker, f"127.0.2.{i + 1}") for i in range(100)]
        for sock in slow:
            sock.sendall(trickle[:6])
        assert all(is_open(sock) for sock in slow)
        deadline = time.monotonic() + 20
        sent = 6
        while any(is_open(sock) for sock in slow):
            assert time.monotonic() < deadline, "slow senders were never closed"
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.send(trickle[sent : sent + 1])
            sent = min(sent + 1, len(trickle) - 1)
            assert is_served(patient)
            time.sleep(0.3)
        assert is_served(patient)
        assert produce_and_consume(broker, "beside-slow") == expected_values()
