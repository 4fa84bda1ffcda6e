"""What a client that has not logged in can make a broker do: nothing but ApiVersions and
the SASL exchange (issue 23). Raw sockets build what no client would send; the broker
is a real process on a SASL listener, its memory read from /proc, and a logged-in
confluent-kafka producer checks that the broker still serves others meanwhile."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_replica.errors import MessageTooLargeError
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native.frames import SIZE
from tests.security.conftest import PASSWORDS, SecureSetup

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
MIB = 1024 * 1024
# A login must finish within this (sasl.server.authentication.timeout.ms, lowered here).
LOGIN_TIMEOUT_MS = 3000
KAFKA_METADATA, KAFKA_HANDSHAKE, KAFKA_AUTHENTICATE = 3, 17, 36
REPLOG_METADATA = 3


def _rss_bytes(broker: BrokerProcess) -> int:
    assert broker.pid is not None
    for line in Path(f"/proc/{broker.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def _kafka_metadata_bomb(topics: int) -> bytes:
    """Metadata v9 (flexible) naming `topics` null topics: two bytes each on the wire."""
    header = struct.pack(">hhih", KAFKA_METADATA, 9, 7, -1) + b"\x00"
    count = topics + 1
    varint = bytearray()
    while count >= 0x80:
        varint.append((count & 0x7F) | 0x80)
        count >>= 7
    varint.append(count)
    body = bytes(varint) + b"\x00\x00" * topics + b"\x01\x00\x00\x00"
    return SIZE.pack(len(header) + len(body)) + header + body


def _replog_metadata_bomb(topics: int) -> bytes:
    """replog's Metadata naming `topics` three-letter topics."""
    header = struct.pack(">hhih", REPLOG_METADATA, 0, 7, -1)
    body = struct.pack(">i", topics) + b"\x00\x03abc" * topics
    return SIZE.pack(len(header) + len(body)) + header + body


def _send_all_or_be_cut_off(sock: socket.socket, data: bytes) -> None:
    with suppress(ConnectionResetError, BrokenPipeError):
        sock.sendall(data)


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """Everything the broker sends before it closes the connection, which it must do
    within `seconds`."""
    sock.settimeout(seconds)
    received = bytearray()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return bytes(received)
        except TimeoutError:
            break
        if not chunk:
            return bytes(received)
        received += chunk
    raise AssertionError(f"the broker kept the connection open for {seconds} s")


@contextmanager
def _tricklers(address: tuple[str, int], declared: list[int]) -> Iterator[list[socket.socket]]:
    """Connections that each declare a frame of the given size and then send a byte of it
    every 200 ms, until the broker closes them or the block ends."""
    socks = [socket.create_connection(address, timeout=5) for _ in declared]
    stop = threading.Event()

    def trickle(sock: socket.socket, size: int) -> None:
        with suppress(OSError):
            sock.sendall(SIZE.pack(size) + struct.pack(">hhi", 0, 0, 1))
            while not stop.wait(0.2):
                sock.send(b"\x00")

    threads = [
        threading.Thread(target=trickle, args=(s, n), daemon=True)
        for s, n in zip(socks, declared, strict=True)
    ]
    for thread in threads:
        thread.start()
    try:
        yield socks
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for sock in socks:
            sock.close()


def _kafka_client(setup: SecureSetup, user: str = "admin") -> dict[str, object]:
    return {
        "bootstrap.servers": setup.brokers.kafka_bootstrap(),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def _timed_produce(producer: Producer, topic: str) -> float:
    errors: list[object] = []
    started = time.monotonic()
    producer.produce(topic, b"v", on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(DEADLINE_S) == 0
    assert errors == [None]
    return time.monotonic() - started


def _attack(address: tuple[str, int], bombs: list[bytes], producer: Producer) -> list[bytes]:
    """Six connections declaring 100 MiB, two trickling a frame under the pre-login cap,
    and the bombs sent whole: each must be closed; a produce meanwhile stays fast. Returns
    what the broker answered on each bomb's connection before closing it."""
    with _tricklers(address, [100 * MIB] * 6 + [400_000] * 2) as trickling:
        answers = []
        for bomb in bombs:
            with socket.create_connection(address, timeout=5) as sock:
                _send_all_or_be_cut_off(sock, bomb)
                answers.append(_closed_within(sock, 10))
        assert _timed_produce(producer, "pre-login") < 1.0
        for sock in trickling[:6]:
            _closed_within(sock, 5)
        for sock in trickling[6:]:
            _closed_within(sock, LOGIN_TIMEOUT_MS / 1000 + 3)
    return answers


def test_before_login_nothing_is_decoded_and_nothing_piles_up(secure: SecureSetup) -> None:
    secure.start(
        1,
        protocol="SASL_PLAINTEXT",
        **{"sasl.server.authentication.timeout.ms": str(LOGIN_TIMEOUT_MS)},
    )
    broker = secure.brokers.brokers[1]
    admin = AdminClient(_kafka_client(secure))
    admin.create_topics([NewTopic("pre-login", 1, 1)])["pre-login"].result(DEADLINE_S)
    producer = Producer({**_kafka_client(secure), "linger.ms": 0})
    deadline = time.monotonic() + DEADLINE_S
    while True:  # until the new topic has a leader and the producer its connection
        try:
            _timed_produce(producer, "pre-login")
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    baseline = _rss_bytes(broker)

    kafka = _attack(
        (broker.host, broker.kafka_port),
        [_kafka_metadata_bomb(1_000_000), _kafka_metadata_bomb(250_000)],
        producer,
    )
    # Kafka's answer to a request it will not read before login: none, the connection closes.
    assert kafka == [b"", b""]
    replog = _attack(
        (broker.host, broker.port),
        [_replog_metadata_bomb(1_000_000), _replog_metadata_bomb(80_000)],
        producer,
    )
    too_large, not_logged_in = replog
    assert struct.unpack_from(">h", too_large, 8)[0] == MessageTooLargeError.code
    assert b"requires SASL" in not_logged_in
    growth = _rss_bytes(broker) - baseline
    assert growth < 50 * MIB, f"the broker's RSS grew by {growth / MIB:.0f} MiB"
