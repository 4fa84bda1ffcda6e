"""The replog listener's API registry: the handler of each api key (the transactional
producer's bound to the broker's coordinators, brokerd/native/transactions.py), and the
versions it serves (the codec's, spark_replica/wire/native/apis.py) of those and of the
SASL steps the dialect answers itself. ApiVersions answers from it, so what is advertised
is what is served."""

from __future__ import annotations

from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.native.controller_requests import (
    handle_controlled_shutdown,
    handle_leader_and_isr,
    handle_offsets_for_leader_epoch,
    handle_stop_replica,
    handle_update_metadata,
)
from brokerd.native.delete_records import handle_delete_records
from brokerd.native.fetch import handle_fetch
from brokerd.native.list_offsets import handle_list_offsets
from brokerd.native.metadata import handle_metadata
from brokerd.native.produce import handle_produce
from brokerd.native.security_admin import (
    handle_alter_user_scram_credentials,
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
    handle_describe_user_scram_credentials,
)
from brokerd.native.topic_admin import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from brokerd.native.transactions import NativeHandler, transaction_handlers
from brokerd.native.write_txn_markers import handle_write_txn_markers
from brokerd.serving.connection_state import SASL_STEPS
from brokerd.transactions.coordinator import TransactionCoordinator
from spark_replica.wire.native.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from spark_replica.wire.native.apis import SUPPORTED_VERSIONS, ApiKey


async def handle_api_versions(
    ctx: BrokerContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return _API_VERSIONS


_DATA_HANDLERS: dict[int, NativeHandler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.LEADER_AND_ISR: handle_leader_and_isr,
    ApiKey.UPDATE_METADATA: handle_update_metadata,
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: handle_offsets_for_leader_epoch,
    ApiKey.STOP_REPLICA: handle_stop_replica,
    ApiKey.CONTROLLED_SHUTDOWN: handle_controlled_shutdown,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
}

# Served whether or not this broker runs coordinators (without them:
# COORDINATOR_NOT_AVAILABLE, and InitProducerId serves idempotent producers).
_TRANSACTION_APIS = transaction_handlers(None, None).keys()

# api key -> (lowest, highest) version served: every handler's, and the SASL steps'.
VERSIONS: dict[int, tuple[int, int]] = {
    int(key): versions
    for key, versions in SUPPORTED_VERSIONS.items()
    if key in _DATA_HANDLERS or key in _TRANSACTION_APIS or key in SASL_STEPS
}
_API_VERSIONS = ApiVersionsResponse(
    [ApiVersionRange(key, low, high) for key, (low, high) in VERSIONS.items()]
)


def native_handlers(
    groups: GroupCoordinator | None, transactions: TransactionCoordinator | None
) -> dict[int, NativeHandler]:
    """Every handler of the replog listener, the transaction APIs bound to the broker's
    coordinators (None: it runs none)."""
    return {**_DATA_HANDLERS, **transaction_handlers(groups, transactions)}
