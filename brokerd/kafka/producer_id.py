"""Kafka's InitProducerId: replog's producer ids, for idempotent and transactional producers.

Without a transactional id the ids come from the same allocator as the replog
listener's (brokerd/core/producer_ids.py), so both kinds of producers share one id space
and one producer state per partition, and one rule for an existing id and epoch (KIP-360's:
bumped only when that epoch is the current one, otherwise a new id).

With one, the transactional id's coordinator answers (brokerd/transactions/coordinator.py;
NOT_COORDINATOR from any other broker): the id's producer id with its epoch bumped, which
fences the previous producer of that id. It needs Write on the TransactionalId, as in
Kafka. Versions before 3 know no PRODUCER_FENCED and are told INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from brokerd.core.authorization import authorize_transactional_id, transactional_id_denied
from brokerd.core.context import BrokerContext
from brokerd.core.partitions import SERVING_ERRORS
from brokerd.core.producer_ids import init_producer
from brokerd.kafka.request import KafkaRequest
from brokerd.kafka.transaction_errors import answered_code
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.producer_requests import init_transactional_producer
from spark_replica.errors import BrokerResponseError, code_of
from spark_replica.security.acl import Operation
from spark_replica.wire.schema import Data

# The first version that knows PRODUCER_FENCED.
FENCED_SINCE = 3


async def handle_init_producer_id(
    transactions: TransactionCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    answer = Data(throttle_time_ms=0, error_code=0, producer_id=-1, producer_epoch=-1)
    if body.transactional_id is not None:
        try:
            producer_id, epoch = await _init_transactional(transactions, ctx, request)
        except BrokerResponseError as exc:
            answer.error_code = answered_code(exc, request.version, FENCED_SINCE)
            return answer
    else:
        try:
            producer_id, epoch = await init_producer(ctx, body.producer_id, body.producer_epoch)
        except SERVING_ERRORS as exc:
            answer.error_code = code_of(exc)
            return answer
    answer.producer_id = producer_id
    answer.producer_epoch = epoch
    return answer


async def _init_transactional(
    transactions: TransactionCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> tuple[int, int]:
    body = request.body
    transactional_id = body.transactional_id
    if not authorize_transactional_id(ctx, request, Operation.WRITE, transactional_id):
        raise transactional_id_denied(request, Operation.WRITE, transactional_id)
    return await init_transactional_producer(
        transactions,
        transactional_id,
        body.transaction_timeout_ms,
        body.producer_id,
        body.producer_epoch,
    )
