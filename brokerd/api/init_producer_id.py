"""Serving InitProducerId: a fresh producer id, or the next epoch of an existing one.

replog has no transaction coordinator, so any broker answers. An epoch is bumped only
when the one named is the id's current epoch as this broker knows it (KIP-360's rule,
brokerd/core/producer_ids.py); a stale or unknown identity, or one whose epoch cannot grow
past the int16 range, gets a new producer id instead, so no client can fence another's
producer through this request. The partitions' producer state
(brokerd/replication/producer_state.py) is what enforces epochs and sequences.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from brokerd.core.producer_ids import ProducerIdManager
from spark_replica.errors import BrokerNotAvailableError, InvalidRequestError, ZooKeeperError
from spark_replica.wire.native.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

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
    producer_id, epoch = await _identity(ctx, request.producer_id, request.producer_epoch)
    return InitProducerIdResponse(producer_id, epoch)


async def _identity(ctx: BrokerContext, producer_id: int, epoch: int) -> tuple[int, int]:
    if ctx.zk is None:
        raise BrokerNotAvailableError("the broker is not connected to ZooKeeper yet")
    manager = _managers.get(ctx.zk)
    if manager is None:
        manager = _managers[ctx.zk] = ProducerIdManager(ctx.zk, ctx.config.broker_id)
    try:
        return await manager.init(producer_id, epoch)
    except ZooKeeperError as exc:
        raise BrokerNotAvailableError(f"cannot claim a producer id block: {exc}") from exc
