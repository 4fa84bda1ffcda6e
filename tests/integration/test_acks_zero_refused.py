"""An acks=0 produce refused by the ACLs closes its connection on the replog listener.

The client reads no answer, so an error answer is never seen: the connection closing is
the only sign it gets (Kafka does the same). Before, the broker wrote an error answer
nobody reads and kept the connection open, and every record sent on it was dropped.
"""

from __future__ import annotations

import socket

import pytest

from spark_replica.records import build_batch
from spark_replica.security.acl import (
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.produce import ACKS_NONE
from spark_replica.zk.security_store import add_acls
from spark_replica.zk.session import connect
from tests.support import BrokerFactory
from tests.support_wire import body_of, encode_frame, produce_request

pytestmark = pytest.mark.slow

TIMEOUT_S = 10.0


def test_a_refused_acks_zero_produce_closes_the_connection(
    brokers: BrokerFactory, zk_connect: str
) -> None:
    zk = connect(zk_connect)
    try:
        add_acls(
            zk,
            ResourcePattern(ResourceType.TOPIC, "closed", PatternType.LITERAL),
            [AclEntry("User:ANONYMOUS", "*", Operation.WRITE, Permission.DENY)],
        )
    finally:
        zk.stop()
        zk.close()
    broker = brokers.start(
        1,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    batch = build_batch(["refused"], timestamps=[1])
    frame = encode_frame(
        int(ApiKey.PRODUCE), body_of(produce_request("closed", 0, batch, acks=ACKS_NONE))
    )
    with socket.create_connection((broker.host, broker.port), TIMEOUT_S) as sock:
        sock.settimeout(TIMEOUT_S)
        sock.sendall(frame)
        assert sock.recv(65536) == b"", "closed, with no answer"
