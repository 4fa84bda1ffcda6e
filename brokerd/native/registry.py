"""The replog listener's API registry: the handler of each api key, and the versions it
serves (the codec's, spark_replica/wire/native/apis.py) of those and of the SASL steps the
dialect answers itself. ApiVersions answers from it, so what is advertised is what is
served."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from brokerd.core.context import BrokerContext
from brokerd.native.controller_requests import (
    handle_controlled_shutdown,
    handle_leader_and_isr,
    handle_offsets_for_leader_epoch,
    handle_stop_replica,
    handle_update_metadata,
)
from brokerd.native.delete_records import handle_delete_records
from brokerd.native.fetch import handle_fetch
from brokerd.native.init_producer_id import handle_init_producer_id
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
from brokerd.native.write_txn_markers import handle_write_txn_markers
from brokerd.serving.connection_state import SASL_STEPS
from spark_replica.wire.native.api_versions import (
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from spark_replica.wire.native.apis import SUPPORTED_VERSIONS, ApiKey

Handler = Callable[[BrokerContext, Any], Awaitable[Any]]


async def handle_api_versions(
    ctx: BrokerContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    return _API_VERSIONS


HANDLERS: dict[int, Handler] = {
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
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
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

# api key -> (lowest, highest) version served: every handler's, and the SASL steps'.
VERSIONS: dict[int, tuple[int, int]] = {
    int(key): versions
    for key, versions in SUPPORTED_VERSIONS.items()
    if key in HANDLERS or key in SASL_STEPS
}
_API_VERSIONS = ApiVersionsResponse(
    [ApiVersionRange(key, low, high) for key, (low, high) in VERSIONS.items()]
)
