"""Kafka's InitProducerId: replog's producer ids, for idempotent producers only.

The ids come from the same allocator as the replog listener's
(brokerd/core/producer_ids.py), so both kinds of producers share one id space and one producer
state per partition, and one rule for an existing id and epoch (KIP-360's: bumped only
when that epoch is the current one, otherwise a new id).

Transactions are not served: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and a message naming transactions, which Kafka's
clients report as a fatal error of the transactional producer (an id that authorizes
nothing), rather than one they would retry.
"""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.core.partitions import SERVING_ERRORS
from brokerd.core.producer_ids import init_producer
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import TransactionalIdAuthorizationFailedError, code_of
from spark_replica.wire.schema import Data


async def handle_init_producer_id(ctx: BrokerContext, request: KafkaRequest) -> Data:
    body = request.body
    answer = Data(throttle_time_ms=0, error_code=0, producer_id=-1, producer_epoch=-1)
    if body.transactional_id is not None:
        answer.error_code = TransactionalIdAuthorizationFailedError.code
        return answer
    try:
        producer_id, epoch = await init_producer(ctx, body.producer_id, body.producer_epoch)
    except SERVING_ERRORS as exc:
        answer.error_code = code_of(exc)
        return answer
    answer.producer_id = producer_id
    answer.producer_epoch = epoch
    return answer
