"""FindCoordinator: which broker coordinates a consumer group or a transactional id.

Request: the key type (int8, Kafka's numbers: 0 a group, 1 a transactional id) and the
key. Response: the coordinator's broker id and its replog address (host, port), where a
client sends the group's or the transaction's requests. Errors travel in the response
header: COORDINATOR_NOT_AVAILABLE while the internal topic is created or its partition
has no leader, which clients retry.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import wire_field
from spark_replica.wire.schema import Tabled, tabled

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


@tabled(wire_field("key_type", "int8"), wire_field("key", "string"))
@dataclass(slots=True)
class FindCoordinatorRequest(Tabled):
    API_KEY = ApiKey.FIND_COORDINATOR
    key: str
    key_type: int = TRANSACTION_KEY_TYPE


@tabled(
    wire_field("node_id", "int32"),
    wire_field("host", "string"),
    wire_field("port", "int32"),
)
@dataclass(slots=True)
class FindCoordinatorResponse(Tabled):
    node_id: int
    host: str
    port: int
