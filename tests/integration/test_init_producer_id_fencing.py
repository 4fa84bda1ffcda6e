"""InitProducerId cannot be used to fence another client's producer (KIP-360's rule).

An existing id and epoch are bumped only when that epoch is the id's current one; a
stale epoch, an epoch never handed out or an id the broker does not know gets a new id
(fencing nobody). Both listeners answer through the same rule. Before, any id and epoch
handed in were bumped, so a client holding an old or guessed identity fenced the
producer that owned it.
"""

from __future__ import annotations

import pytest

from spark_replica.client import BrokerConnection
from spark_replica.client.kafka_connection import KafkaConnection
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native.init_producer_id import InitProducerIdRequest
from spark_replica.wire.schema import Data
from tests.support import run

pytestmark = pytest.mark.slow

TIMEOUT_S = 30.0
INIT_PRODUCER_ID_V3 = (22, 3)  # the first version that names an existing identity


async def native_init(broker: BrokerProcess, producer_id: int, epoch: int) -> tuple[int, int]:
    conn = BrokerConnection(broker.host, broker.port)
    await conn.connect()
    try:
        request = InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch)
        answer = await conn.send(request, timeout_s=TIMEOUT_S)
        return answer.producer_id, answer.producer_epoch
    finally:
        await conn.close()


async def kafka_init(broker: BrokerProcess, producer_id: int, epoch: int) -> tuple[int, int]:
    address = (broker.host, broker.kafka_port)
    assert broker.kafka_port is not None
    conn = KafkaConnection(address, SecurityConfig(), "fencing", TIMEOUT_S)
    await conn.connect()
    try:
        body = Data(
            transactional_id=None,
            transaction_timeout_ms=60_000,
            producer_id=producer_id,
            producer_epoch=epoch,
        )
        answer = await conn.call(INIT_PRODUCER_ID_V3, body)
        assert answer.error_code == 0
        return answer.producer_id, answer.producer_epoch
    finally:
        await conn.close()


def test_only_the_current_epoch_is_bumped_on_both_listeners(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        for init in (native_init, kafka_init):
            owner_id, _ = await init(broker, -1, -1)
            assert await init(broker, owner_id, 0) == (owner_id, 1), "the owner bumps"
            stale = await init(broker, owner_id, 0)
            assert stale[0] not in (-1, owner_id) and stale[1] == 0, "a stale epoch: new id"
            never = await init(broker, owner_id, 9)
            assert never[0] not in (-1, owner_id) and never[1] == 0, "an epoch never given"
            unknown = await init(broker, owner_id + 100_000, 0)
            assert unknown[0] != owner_id + 100_000 and unknown[1] == 0, "an unknown id"
            assert await init(broker, owner_id, 1) == (owner_id, 2), "the owner still bumps"

    run(scenario())
