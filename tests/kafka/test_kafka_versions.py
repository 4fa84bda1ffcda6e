"""ApiVersions advertises exactly what the Kafka listener implements: every API at every
version it lists answers a minimal well-formed request (all fields at their defaults:
empty lists, empty names) with one response that decodes under that version's layout to
its last byte, and with the same correlation id. A version the listener advertises but
cannot serve would show up here as a closed connection or an answer that does not decode.
"""

from __future__ import annotations

import socket
import struct

import pytest

from spark_replica.wire.kafka.headers import encode_request, response_header_is_flexible
from spark_replica.wire.kafka.versions import RESPONSES
from spark_replica.wire.primitives import Reader
from spark_replica.wire.schema import Data
from tests.kafka.clients import SOCKET_TIMEOUT_S, read_frame, served_versions
from tests.support import BrokerFactory

pytestmark = pytest.mark.slow

PRODUCE, FETCH = 0, 1
# Fields a default would make wait or stay silent: acks=0 has no answer at all.
NOT_DEFAULT = {PRODUCE: {"acks": -1, "timeout_ms": 1000}, FETCH: {"max_wait_ms": 0}}


def test_every_advertised_version_answers_a_minimal_request(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    address = (broker.host, broker.kafka_port)
    served = served_versions(address)
    assert served, "ApiVersions lists the APIs"
    failures = []
    correlation_id = 0
    for key, (low, high) in sorted(served.items()):
        for version in range(low, high + 1):
            correlation_id += 1
            body = Data(**NOT_DEFAULT.get(key, {}))
            request = encode_request(key, version, correlation_id, "versions", body)
            # A connection each: a refused SASL step closes the one it came on.
            with socket.create_connection(address, timeout=SOCKET_TIMEOUT_S) as sock:
                sock.settimeout(SOCKET_TIMEOUT_S)
                sock.sendall(b"".join(bytes(b) for b in request))
                try:
                    payload = read_frame(sock)
                except (AssertionError, OSError) as exc:
                    failures.append(f"api {key} v{version}: no answer ({exc})")
                    continue
            problem = check_answer(key, version, correlation_id, payload)
            if problem:
                failures.append(f"api {key} v{version}: {problem}")
    assert not failures, "\n".join(failures)


def check_answer(key: int, version: int, correlation_id: int, payload: bytes) -> str | None:
    reader = Reader(payload)
    (answered,) = struct.unpack_from(">i", payload)
    if answered != correlation_id:
        return f"answered correlation id {answered}, asked {correlation_id}"
    reader.int32()
    try:
        if response_header_is_flexible(key, version):
            reader.skip_tagged_fields()
        RESPONSES[key].decode(version, reader)
    except Exception as exc:
        return f"answer does not decode: {exc!r}"
    if reader.pos != len(payload):
        return f"answer has {len(payload) - reader.pos} bytes after its body"
    return None
