"""Kafka's FindCoordinator: which broker coordinates a consumer group (key type 0) or a
transactional id (key type 1), one handler deciding per key type.

A group's coordinator is the leader of its `__consumer_offsets` partition, a
transactional id's the leader of its `__transaction_state` partition; either topic is
created on the first request that needs it (COORDINATOR_NOT_AVAILABLE meanwhile, which
clients retry). Finding a coordinator needs Describe on the group or the transactional
id, as in Kafka; a key type Kafka does not define is INVALID_REQUEST. From v4 one request
asks for several keys of one type and each gets its own answer.
"""

from __future__ import annotations

from brokerd.core.authorization import (
    authorize_group,
    authorize_transactional_id,
    group_denied,
    transactional_id_denied,
)
from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.kafka.request import KafkaRequest
from brokerd.transactions.coordinator import TransactionCoordinator
from brokerd.transactions.producer_requests import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    find_coordinator,
)
from spark_replica.errors import BrokerResponseError, code_of, wire_message
from spark_replica.security.acl import Operation
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.schema import Data


async def handle_find_coordinator(
    groups: GroupCoordinator | None,
    transactions: TransactionCoordinator | None,
    ctx: BrokerContext,
    request: KafkaRequest,
) -> Data:
    body = request.body
    keys = body.coordinator_keys if request.version >= 4 else [body.key]
    found = [_find(groups, transactions, ctx, request, key, body.key_type) for key in keys]
    if request.version >= 4:
        return Data(throttle_time_ms=0, coordinators=found)
    only = found[0]
    return Data(
        throttle_time_ms=0,
        error_code=only.error_code,
        error_message=only.error_message,
        node_id=only.node_id,
        host=only.host,
        port=only.port,
    )


def _find(
    groups: GroupCoordinator | None,
    transactions: TransactionCoordinator | None,
    ctx: BrokerContext,
    request: KafkaRequest,
    key: str,
    key_type: int,
) -> Data:
    answer = Data(key=key, node_id=-1, host="", port=-1, error_code=0, error_message=None)
    try:
        broker = _coordinator(groups, transactions, ctx, request, key, key_type)
    except BrokerResponseError as exc:
        answer.error_code = code_of(exc)
        answer.error_message = wire_message(exc)
        return answer
    answer.node_id, answer.host, answer.port = (
        broker.broker_id,
        broker.kafka_host,
        broker.kafka_port,
    )
    return answer


def _coordinator(
    groups: GroupCoordinator | None,
    transactions: TransactionCoordinator | None,
    ctx: BrokerContext,
    request: KafkaRequest,
    key: str,
    key_type: int,
) -> BrokerInfo:
    if key_type == GROUP_KEY_TYPE and not authorize_group(ctx, request, Operation.DESCRIBE, key):
        raise group_denied(request, Operation.DESCRIBE, key)
    if key_type == TRANSACTION_KEY_TYPE and not authorize_transactional_id(
        ctx, request, Operation.DESCRIBE, key
    ):
        raise transactional_id_denied(request, Operation.DESCRIBE, key)
    return find_coordinator(groups, transactions, key, key_type)
