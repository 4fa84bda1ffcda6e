"""The replog protocol: framing (frames.py) and one module per API.

Each message is a dataclass whose layout is a table read and written by the engine both
protocols share (table.py, spark_replica.wire.schema). Codecs here do no I/O: they turn
messages into bytes and bytes into messages, so they are tested with plain values.
Connections (client) and the server (broker) live elsewhere.
"""

from typing import Any, Protocol

from spark_replica.wire.native.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from spark_replica.wire.native.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from spark_replica.wire.native.api_versions import ApiVersionsRequest, ApiVersionsResponse
from spark_replica.wire.native.apis import SUPPORTED_VERSIONS, ApiKey, is_supported
from spark_replica.wire.native.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from spark_replica.wire.native.controller_requests import (
    EmptyResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.fetch import FetchRequest, FetchResponse
from spark_replica.wire.native.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from spark_replica.wire.native.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from spark_replica.wire.native.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from spark_replica.wire.native.metadata import MetadataRequest, MetadataResponse
from spark_replica.wire.native.offsets_for_leader_epoch import (
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from spark_replica.wire.native.produce import ProduceRequest, ProduceResponse
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    RegisterSinkParticipantsResponse,
)
from spark_replica.wire.native.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from spark_replica.wire.native.scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from spark_replica.wire.native.topic_admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    TopicResultsResponse,
)
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from spark_replica.wire.native.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from spark_replica.wire.primitives import Reader


class MessageType(Protocol):
    """A request or response class, as the dispatchers use it: decoded from a frame body.

    Each API's class has its own return type; the tables mix them, so it is Any here.
    """

    def read(self, r: Reader, version: int = ..., /) -> Any: ...


# The response type of each API key.
RESPONSE_TYPES: dict[ApiKey, MessageType] = {
    ApiKey.PRODUCE: ProduceResponse,
    ApiKey.FETCH: FetchResponse,
    ApiKey.LIST_OFFSETS: ListOffsetsResponse,
    ApiKey.METADATA: MetadataResponse,
    ApiKey.API_VERSIONS: ApiVersionsResponse,
    ApiKey.CREATE_TOPICS: TopicResultsResponse,
    ApiKey.DELETE_TOPICS: TopicResultsResponse,
    ApiKey.DELETE_RECORDS: DeleteRecordsResponse,
    ApiKey.LEADER_AND_ISR: LeaderAndIsrResponse,
    ApiKey.UPDATE_METADATA: EmptyResponse,
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: OffsetsForLeaderEpochResponse,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdResponse,
    ApiKey.STOP_REPLICA: LeaderAndIsrResponse,
    ApiKey.CONTROLLED_SHUTDOWN: ControlledShutdownResponse,
    ApiKey.CREATE_PARTITIONS: TopicResultsResponse,
    ApiKey.SASL_HANDSHAKE: SaslHandshakeResponse,
    ApiKey.SASL_AUTHENTICATE: SaslAuthenticateResponse,
    ApiKey.DESCRIBE_ACLS: DescribeAclsResponse,
    ApiKey.CREATE_ACLS: CreateAclsResponse,
    ApiKey.DELETE_ACLS: DeleteAclsResponse,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DescribeUserScramCredentialsResponse,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AlterUserScramCredentialsResponse,
    ApiKey.WRITE_TXN_MARKERS: WriteTxnMarkersResponse,
    ApiKey.FIND_COORDINATOR: FindCoordinatorResponse,
    ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnResponse,
    ApiKey.ADD_OFFSETS_TO_TXN: EmptyResponse,
    ApiKey.END_TXN: EmptyResponse,
    ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitResponse,
    ApiKey.REGISTER_SINK_PARTICIPANTS: RegisterSinkParticipantsResponse,
}

# The request type of each API key.
REQUEST_TYPES: dict[ApiKey, MessageType] = {
    ApiKey.PRODUCE: ProduceRequest,
    ApiKey.FETCH: FetchRequest,
    ApiKey.LIST_OFFSETS: ListOffsetsRequest,
    ApiKey.METADATA: MetadataRequest,
    ApiKey.API_VERSIONS: ApiVersionsRequest,
    ApiKey.CREATE_TOPICS: CreateTopicsRequest,
    ApiKey.DELETE_TOPICS: DeleteTopicsRequest,
    ApiKey.DELETE_RECORDS: DeleteRecordsRequest,
    ApiKey.LEADER_AND_ISR: LeaderAndIsrRequest,
    ApiKey.UPDATE_METADATA: UpdateMetadataRequest,
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: OffsetsForLeaderEpochRequest,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdRequest,
    ApiKey.STOP_REPLICA: StopReplicaRequest,
    ApiKey.CONTROLLED_SHUTDOWN: ControlledShutdownRequest,
    ApiKey.CREATE_PARTITIONS: CreatePartitionsRequest,
    ApiKey.SASL_HANDSHAKE: SaslHandshakeRequest,
    ApiKey.SASL_AUTHENTICATE: SaslAuthenticateRequest,
    ApiKey.DESCRIBE_ACLS: DescribeAclsRequest,
    ApiKey.CREATE_ACLS: CreateAclsRequest,
    ApiKey.DELETE_ACLS: DeleteAclsRequest,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DescribeUserScramCredentialsRequest,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AlterUserScramCredentialsRequest,
    ApiKey.WRITE_TXN_MARKERS: WriteTxnMarkersRequest,
    ApiKey.FIND_COORDINATOR: FindCoordinatorRequest,
    ApiKey.ADD_PARTITIONS_TO_TXN: AddPartitionsToTxnRequest,
    ApiKey.ADD_OFFSETS_TO_TXN: AddOffsetsToTxnRequest,
    ApiKey.END_TXN: EndTxnRequest,
    ApiKey.TXN_OFFSET_COMMIT: TxnOffsetCommitRequest,
    ApiKey.REGISTER_SINK_PARTICIPANTS: RegisterSinkParticipantsRequest,
}

__all__ = [
    "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "SUPPORTED_VERSIONS",
    "AddOffsetsToTxnRequest",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
    "ApiKey",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "CreatePartitionsRequest",
    "CreateTopicsRequest",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DeleteTopicsRequest",
    "DescribeAclsRequest",
    "DescribeAclsResponse",
    "DescribeUserScramCredentialsRequest",
    "DescribeUserScramCredentialsResponse",
    "EmptyResponse",
    "EndTxnRequest",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetsForLeaderEpochRequest",
    "OffsetsForLeaderEpochResponse",
    "ProduceRequest",
    "ProduceResponse",
    "RegisterSinkParticipantsRequest",
    "RegisterSinkParticipantsResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "StopReplicaRequest",
    "TopicResultsResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "UpdateMetadataRequest",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "is_supported",
]
