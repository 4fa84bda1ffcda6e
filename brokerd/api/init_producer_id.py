"""Serving InitProducerId: a fresh producer id, or the next epoch of an existing one.

replog has no transaction coordinator, so any broker answers and keeps no record of
the ids it gave out; the partitions' producer state (brokerd/producer_state.py) is
what enforces epochs and sequences. A bump to an epoch past the int16 range starts a
new producer id instead, as Kafka does.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from kazoo.client import KazooClient

from brokerd.api.context import BrokerContext
from brokerd.producer_ids import ProducerIdManager
from spark_replica.errors import BrokerNotAvailableError, InvalidRequestError, ZooKeeperError
from spark_replica.protocol.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

MAX_PRODUCER_EPOCH = 2**15 - 1

# One id allocator per ZooKeeper client, i.e. per broker: its current block lives here.
_managers: WeakKeyDictionary[KazooClient, ProducerIdManager] = WeakKeyDictionary()


async def handle_init_producer_id(
    ctx: BrokerContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        raise InvalidRequestError("transactions are not supported; send a null transactional id")
    new_producer = request.producer_id == NO_PRODUCER_ID
    if new_producer != (request.producer_epoch == NO_PRODUCER_EPOCH) or (
        not new_producer and (request.producer_id < 0 or request.producer_epoch < 0)
    ):
        raise InvalidRequestError(
            f"producer id {request.producer_id} with epoch {request.producer_epoch}: send "
            "both -1 for a new producer, or both of an existing one to bump its epoch"
        )
    if not new_producer and request.producer_epoch < MAX_PRODUCER_EPOCH:
        return InitProducerIdResponse(request.producer_id, request.producer_epoch + 1)
    return InitProducerIdResponse(await _next_producer_id(ctx), 0)


async def _next_producer_id(ctx: BrokerContext) -> int:
    if ctx.zk is None:
        raise BrokerNotAvailableError("the broker is not connected to ZooKeeper yet")
    manager = _managers.get(ctx.zk)
    if manager is None:
        manager = _managers[ctx.zk] = ProducerIdManager(ctx.zk, ctx.config.broker_id)
    try:
        return await manager.next_id()
    except ZooKeeperError as exc:
        raise BrokerNotAvailableError(f"cannot claim a producer id block: {exc}") from exc
