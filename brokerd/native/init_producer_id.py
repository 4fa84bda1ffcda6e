"""Serving InitProducerId: a fresh producer id, or the next epoch of an existing one.

replog has no transaction coordinator, so any broker answers. An epoch is bumped only
when the one named is the id's current epoch as this broker knows it (KIP-360's rule,
brokerd/core/producer_ids.py); a stale or unknown identity, or one whose epoch cannot grow
past the int16 range, gets a new producer id instead, so no client can fence another's
producer through this request. The partitions' producer state
(brokerd/replication/producer_state.py) is what enforces epochs and sequences.
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.producer_ids import init_producer
from spark_replica.errors import InvalidRequestError
from spark_replica.wire.native.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)


async def handle_init_producer_id(
    ctx: BrokerContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        raise InvalidRequestError("transactions are not supported; send a null transactional id")
    producer_id, epoch = await init_producer(ctx, request.producer_id, request.producer_epoch)
    return InitProducerIdResponse(producer_id, epoch)
