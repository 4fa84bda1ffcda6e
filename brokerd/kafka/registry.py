"""The Kafka listener's API registry: its handlers by api key (data, admin and ACLs, and
the group and transaction APIs bound to their coordinators, brokerd/kafka/groups.py,
find_coordinator.py, producer_id.py and transactions.py) and the versions served
of each: the tabled versions (spark_replica/wire/kafka/versions.py) of the APIs with a
handler and of the SASL steps the dialect answers itself. ApiVersions answers from it, so
a client negotiates exactly what exists."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.kafka.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from brokerd.kafka.delete_records import handle_delete_records
from brokerd.kafka.describe_configs import handle_describe_configs
from brokerd.kafka.describe_producers import handle_describe_producers
from brokerd.kafka.fetch import handle_fetch
from brokerd.kafka.find_coordinator import handle_find_coordinator
from brokerd.kafka.groups import group_handlers
from brokerd.kafka.metadata import handle_metadata
from brokerd.kafka.offsets import handle_list_offsets, handle_offset_for_leader_epoch
from brokerd.kafka.produce import handle_produce
from brokerd.kafka.producer_id import handle_init_producer_id
from brokerd.kafka.request import KafkaHandler, KafkaRequest
from brokerd.kafka.topic_admin import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from brokerd.kafka.transactions import transaction_handlers
from brokerd.kafka.txn_offset_commit import handle_txn_offset_commit
from brokerd.kafka.write_txn_markers import handle_write_txn_markers
from brokerd.serving.connection_state import API_VERSIONS, LOGIN_APIS
from brokerd.transactions.coordinator import TransactionCoordinator
from spark_replica.wire.kafka.versions import SERVED
from spark_replica.wire.schema import Data

TXN_OFFSET_COMMIT = 28
DATA_HANDLERS: dict[int, KafkaHandler] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    19: handle_create_topics,
    20: handle_delete_topics,
    21: handle_delete_records,
    23: handle_offset_for_leader_epoch,
    27: handle_write_txn_markers,
    29: handle_describe_acls,
    30: handle_create_acls,
    31: handle_delete_acls,
    32: handle_describe_configs,
    37: handle_create_partitions,
    61: handle_describe_producers,
}


@dataclass(frozen=True)
class Registry:
    """What one Kafka listener serves: a handler and a version range per api key."""

    handlers: dict[int, KafkaHandler]
    versions: dict[int, tuple[int, int]]
    # ApiVersions' list, built once: (api_key, min_version, max_version) entries
    api_keys: list[Data]


FIND_COORDINATOR = 10
INIT_PRODUCER_ID = 22


def kafka_registry(
    groups: GroupCoordinator | None, transactions: TransactionCoordinator | None
) -> Registry:
    handlers: dict[int, KafkaHandler] = {
        **DATA_HANDLERS,
        **group_handlers(groups),
        **transaction_handlers(groups, transactions),
        FIND_COORDINATOR: partial(handle_find_coordinator, groups, transactions),
        INIT_PRODUCER_ID: partial(handle_init_producer_id, transactions),
        TXN_OFFSET_COMMIT: partial(handle_txn_offset_commit, groups),
    }
    versions = {
        key: served
        for key, served in sorted(SERVED.items())
        if key in handlers or key in LOGIN_APIS
    }
    api_keys = [
        Data(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in versions.items()
    ]
    handlers[API_VERSIONS] = partial(_handle_api_versions, api_keys)
    return Registry(handlers, versions, api_keys)


async def _handle_api_versions(
    api_keys: list[Data], ctx: BrokerContext, request: KafkaRequest
) -> Data:
    return Data(error_code=0, api_keys=api_keys, throttle_time_ms=0)
