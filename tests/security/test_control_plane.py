"""The control plane is fenced: requests only the controller and the brokers may send
need ClusterAction on the cluster, so an authenticated client cannot stop replicas,
claim a follower's place, or poison the controller epoch; and the broker keeps obeying
the real controller afterwards."""

from __future__ import annotations

import pytest

from spark_replica.client import Admin, BrokerConnection, Cluster, Producer, ProducerConfig
from spark_replica.errors import ClusterAuthorizationFailedError
from spark_replica.wire.native.controlled_shutdown import ControlledShutdownRequest
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    PartitionLeaderState,
    StopReplicaRequest,
    StopReplicaTopic,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.zk import znodes
from spark_replica.zk.session import connect
from tests.security.conftest import SecureSetup
from tests.support import run

pytestmark = pytest.mark.slow

HUGE_EPOCH = 2**31 - 1


def _broker_epoch(setup: SecureSetup, broker_id: int) -> int:
    zk = connect(setup.zk_connect)
    try:
        stat = zk.exists(znodes.broker_path(broker_id))
        assert stat is not None
        return stat.czxid
    finally:
        zk.stop()
        zk.close()


def test_a_client_cannot_act_as_controller_or_replica(secure: SecureSetup) -> None:
    secure.start(1)
    topic = "fenced"
    # The real broker epoch: without the fence, these requests would be obeyed.
    header = ControllerHeader(1, HUGE_EPOCH, _broker_epoch(secure, 1))
    forged = [
        LeaderAndIsrRequest(
            header, False, [TopicLeaderStates(topic, [PartitionLeaderState(0, 1, 99, [1], 0, [1])])]
        ),
        StopReplicaRequest(header, True, [StopReplicaTopic(topic, [0])]),
        UpdateMetadataRequest(header, [], []),
        ControlledShutdownRequest(1, header.broker_epoch),
        FetchRequest(100, 1, 1 << 20, [FetchTopic(topic, [FetchPartition(0, 0, 1 << 20)])], 1),
    ]

    async def scenario() -> list[str]:
        admin = Cluster(secure.brokers.bootstrap, security=secure.client("admin"))
        try:
            await Admin(admin).create_topic(topic, 1, 1)
        finally:
            await admin.close()
        host, port = secure.brokers.bootstrap[0]
        refused = []
        for request in forged:
            conn = BrokerConnection(host, port, security=secure.client("alice"))
            await conn.connect()
            try:
                with pytest.raises(ClusterAuthorizationFailedError):
                    await conn.send(request)
                refused.append(type(request).__name__)
            finally:
                await conn.close()
        # The broker still takes the real controller's word: a new topic gets a leader
        # (a LeaderAndIsr at the real epoch) and takes writes, and so does the old one.
        admin = Cluster(secure.brokers.bootstrap, security=secure.client("admin"))
        try:
            await Admin(admin).create_topic("after", 1, 1)
            producer = Producer(admin, ProducerConfig(delivery_timeout_ms=20_000))
            await producer.send_records("after", ["ok"], partition=0)
            await producer.send_records(topic, ["ok"], partition=0)
        finally:
            await admin.close()
        return refused

    assert len(run(scenario())) == 5
