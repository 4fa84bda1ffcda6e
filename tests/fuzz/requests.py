"""Valid requests of every API the broker serves, with random but plausible field values.

The fuzzer mutates these, so they must reach deep: names of topics that exist, partition
numbers that exist, offsets near the log end, the broker's real id and epoch. A share of
them is "hostile but valid": fields a careful client never sends (negative offsets, huge
max_bytes, unknown topics, epochs far in the future) that still decode, so that they pass
the decoders and land in the handlers.

`Target` names what exists on the broker; `REQUEST_GENERATORS` has one generator per API
key of REQUEST_TYPES (a unit test checks that none is missing). Everything here is pure:
a `random.Random` in, a request object or bytes out.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from spark_replica.records import build_batch
from spark_replica.wire.native import (
    ApiKey,
    ApiVersionsRequest,
    ControlledShutdownRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.acls import (
    AclFilter,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    WireAclBinding,
)
from spark_replica.wire.native.add_partitions_to_txn import AddPartitionsToTxnRequest, TxnTopic
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    PartitionLeaderState,
    StopReplicaTopic,
    TopicLeaderStates,
)
from spark_replica.wire.native.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.fetch import FetchPartition, FetchTopic
from spark_replica.wire.native.find_coordinator import FindCoordinatorRequest
from spark_replica.wire.native.frames import SIZE, RequestHeader
from spark_replica.wire.native.list_offsets import ListOffsetsPartition, ListOffsetsTopic
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.native.offsets_for_leader_epoch import EpochQuery, EpochQueryTopic
from spark_replica.wire.native.produce import ProducePartition, ProduceTopic
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    SinkParticipant,
    SinkParticipantTopic,
)
from spark_replica.wire.native.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from spark_replica.wire.native.scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramDeletion,
    ScramUpsertion,
)
from spark_replica.wire.native.topic_admin import NewTopic, PartitionCount
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffset,
    TxnOffsetCommitRequest,
    TxnOffsetTopic,
)
from spark_replica.wire.native.write_txn_markers import (
    MarkerTopic,
    TxnMarkerRequestEntry,
    WriteTxnMarkersRequest,
)
from spark_replica.wire.primitives import Writer

INT16_MAX = 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BOUNDARY_INT32 = [INT32_MIN, -2, -1, 0, 1, INT16_MAX, 1 << 20, INT32_MAX]
BOUNDARY_INT64 = [INT64_MIN, -2, -1, 0, 1, INT32_MAX, INT64_MAX]

# Scratch topics a fuzzed CreateTopics may make (and DeleteTopics remove); never more.
SCRATCH_TOPICS = ("fuzz-scratch-a", "fuzz-scratch-b")
MAX_SCRATCH_PARTITIONS = 8
# Configs a generated CreateTopics may set: harmless to a short run.
SCRATCH_CONFIGS = {"retention.ms": "60000", "cleanup.policy": "delete"}
UNKNOWN_TOPICS = ("fuzz-unknown", "", "bad/name", "x" * 300, "\udcff\udcfe")
# A fetch that may wait longer than this is sent without waiting for its answer.
MAX_ANSWER_WAIT_MS = 50
CLIENT_IDS = ("fuzz", None, "", "\udcff")
# Users and principals the security admin APIs may name: the fuzz broker has no authorizer,
# so their credentials and ACLs change nothing that the run depends on.
FUZZ_USERS = ("fuzz-user", "fuzz-other")
HOSTILE_USERS = ("", "\udcff", "a,b=c", "x" * 300)
HOSTILE_PRINCIPALS = ("fuzz-user", "Group:x", "User:", "")


@dataclass(frozen=True)
class Target:
    """What exists on the broker under fuzz, so that valid requests hit it.

    `topics` (name -> partition count) must survive the run: hostile requests never
    delete or re-lead them. `victim_topic` is the one topic controller requests with the
    broker's real epoch may re-lead, stop and delete.
    """

    topics: dict[str, int]
    victim_topic: str
    broker_id: int
    broker_epoch: int
    controller_epoch: int
    brokers: tuple[BrokerInfo, ...]


class RequestGenerator:
    """Random valid requests for one Target; `hostile` is the share of hostile values."""

    def __init__(self, target: Target, rng: random.Random, hostile: float = 0.3) -> None:
        self.target = target
        self.rng = rng
        self.hostile = hostile
        self.batches = _sample_batches()

    def request(self, api_key: ApiKey) -> Any:
        return REQUEST_GENERATORS[api_key](self)

    # ----------------------------------------------------------------- field values

    def is_hostile(self) -> bool:
        return self.rng.random() < self.hostile

    def int32(self, low: int, high: int) -> int:
        return self.rng.choice(BOUNDARY_INT32) if self.is_hostile() else self.rng.randint(low, high)

    def int64(self, low: int, high: int) -> int:
        return self.rng.choice(BOUNDARY_INT64) if self.is_hostile() else self.rng.randint(low, high)

    def topic(self) -> tuple[str, int]:
        """A topic that exists (mostly) and its partition count, or an unknown one."""
        if self.is_hostile():
            return self.rng.choice(UNKNOWN_TOPICS), 1
        name = self.rng.choice(list(self.target.topics))
        return name, self.target.topics[name]

    def partitions(self, count: int) -> list[int]:
        chosen = self.rng.sample(range(count), self.rng.randint(1, count))
        if self.is_hostile():
            chosen.append(self.rng.choice([-1, count, INT32_MAX]))
        return chosen

    def topic_partitions(self) -> list[tuple[str, list[int]]]:
        return [(name, self.partitions(count)) for name, count in self._topics()]

    def _topics(self) -> list[tuple[str, int]]:
        return [self.topic() for _ in range(self.rng.randint(1, 2))]

    def epoch(self) -> int:
        """A leader epoch: -1 (unchecked), a plausible one, or far in the future."""
        return self.rng.choice([-1, 0, 1, 2, INT32_MAX] if self.is_hostile() else [-1, 0, 1])

    def records(self) -> bytes:
        batch = self.rng.choice(self.batches)
        if not self.is_hostile():
            return batch
        kind = self.rng.randrange(4)
        if kind == 0:
            return b""
        if kind == 1:
            return batch + batch[: self.rng.randrange(len(batch))]
        corrupted = bytearray(batch)
        corrupted[self.rng.randrange(len(corrupted))] ^= 1 << self.rng.randrange(8)
        return bytes(corrupted)

    def controller_header(self) -> ControllerHeader:
        """Mostly fenced (a stale or unknown broker epoch); sometimes the real one."""
        real = self.target.broker_epoch
        epoch = self.rng.choice([real, real - 1, real + 1, -1, 0, INT64_MAX])
        controller_epoch = self.target.controller_epoch
        if epoch != real:
            controller_epoch = self.rng.choice([controller_epoch, -1, 0, INT32_MAX])
        return ControllerHeader(self.target.broker_id, controller_epoch, epoch)

    def controller_topic(self) -> str:
        """Controller requests name the victim topic, or an unknown one when fenced."""
        return self.rng.choice([self.target.victim_topic, self.target.victim_topic, "fuzz-none"])

    def leader_state(self, partition: int) -> PartitionLeaderState:
        ids = [b.broker_id for b in self.target.brokers]
        leader = self.rng.choice([*ids, -1, 99])
        isr = self.rng.sample(ids, self.rng.randint(0, len(ids)))
        return PartitionLeaderState(
            partition, leader, self.epoch(), isr, self.int32(0, 5), self.rng.sample(ids, len(ids))
        )

    def broker_infos(self) -> list[BrokerInfo]:
        infos = list(self.target.brokers)
        if self.is_hostile():
            infos.append(BrokerInfo(99, "127.0.0.1", self.rng.choice([0, 1, 65535])))
        return infos


# --------------------------------------------------------------------------- one per API


def _produce(g: RequestGenerator) -> ProduceRequest:
    acks = g.rng.choice([1, 1, -1, 0, 2, -2] if g.is_hostile() else [1, -1, 0])
    topics = [
        ProduceTopic(name, [ProducePartition(p, g.records()) for p in partitions])
        for name, partitions in g.topic_partitions()
    ]
    return ProduceRequest(acks, g.int32(0, 1000), topics)


def _fetch(g: RequestGenerator) -> FetchRequest:
    topics = [
        FetchTopic(
            name,
            [FetchPartition(p, g.int64(0, 50), g.int32(1, 1 << 16), g.epoch()) for p in partitions],
        )
        for name, partitions in g.topic_partitions()
    ]
    replica_id = -1
    if g.is_hostile():
        replica_id = g.rng.choice([b.broker_id for b in g.target.brokers] + [-2, 99])
    max_wait_ms = g.rng.choice([0, 0, 10, MAX_ANSWER_WAIT_MS, INT32_MAX])
    return FetchRequest(max_wait_ms, g.int32(0, 1), g.int32(1, 1 << 20), topics, replica_id)


def _list_offsets(g: RequestGenerator) -> ListOffsetsRequest:
    topics = [
        ListOffsetsTopic(
            name,
            [
                ListOffsetsPartition(p, g.rng.choice([-2, -1, g.int64(0, 2**41)]), g.epoch())
                for p in partitions
            ],
        )
        for name, partitions in g.topic_partitions()
    ]
    return ListOffsetsRequest(topics, g.rng.choice([-1, -1, -2, g.target.broker_id]))


def _metadata(g: RequestGenerator) -> MetadataRequest:
    if g.rng.random() < 0.3:
        return MetadataRequest(None)
    return MetadataRequest([name for name, _ in g._topics()])


def _api_versions(g: RequestGenerator) -> ApiVersionsRequest:
    return ApiVersionsRequest()


def _create_topics(g: RequestGenerator) -> CreateTopicsRequest:
    partitions = g.rng.choice([1, 2, MAX_SCRATCH_PARTITIONS, 0, -1])
    factor = g.rng.choice([1, len(g.target.brokers), 0, -1, INT16_MAX])
    name = g.rng.choice([*SCRATCH_TOPICS, *g.target.topics])
    configs = dict(g.rng.sample(sorted(SCRATCH_CONFIGS.items()), g.rng.randint(0, 2)))
    if g.is_hostile():
        configs[g.rng.choice(["retention.ms", "no.such.config"])] = g.rng.choice(["-5", "x", ""])
    return CreateTopicsRequest([NewTopic(name, partitions, factor, configs)], g.int32(0, 1000))


def _delete_topics(g: RequestGenerator) -> DeleteTopicsRequest:
    names = g.rng.sample([*SCRATCH_TOPICS, *UNKNOWN_TOPICS], g.rng.randint(1, 2))
    return DeleteTopicsRequest(names, g.int32(0, 1000))


def _delete_records(g: RequestGenerator) -> DeleteRecordsRequest:
    name = g.rng.choice([*SCRATCH_TOPICS, *UNKNOWN_TOPICS])
    partitions = [
        DeleteRecordsPartition(p, g.rng.choice([-1, 0, g.int64(-(2**41), 2**41)]))
        for p in range(g.rng.randint(0, 2))
    ]
    return DeleteRecordsRequest([DeleteRecordsTopic(name, partitions)], g.int32(0, 1000))


def _create_partitions(g: RequestGenerator) -> CreatePartitionsRequest:
    name = g.rng.choice([*SCRATCH_TOPICS, *g.target.topics, *UNKNOWN_TOPICS])
    count = g.rng.choice([1, 2, 3, MAX_SCRATCH_PARTITIONS, 0, -1])
    return CreatePartitionsRequest([PartitionCount(name, count)], g.int32(0, 1000))


def _leader_and_isr(g: RequestGenerator) -> LeaderAndIsrRequest:
    topic = g.controller_topic()
    states = [g.leader_state(p) for p in g.rng.sample(range(4), g.rng.randint(1, 3))]
    return LeaderAndIsrRequest(
        g.controller_header(),
        g.rng.random() < 0.2,
        [TopicLeaderStates(topic, states)],
        g.broker_infos(),
    )


def _update_metadata(g: RequestGenerator) -> UpdateMetadataRequest:
    states = [
        TopicLeaderStates(name, [g.leader_state(p) for p in range(count)])
        for name, count in g.target.topics.items()
    ]
    return UpdateMetadataRequest(g.controller_header(), g.broker_infos(), states)


def _stop_replica(g: RequestGenerator) -> StopReplicaRequest:
    partitions = g.rng.sample(range(4), g.rng.randint(1, 2))
    return StopReplicaRequest(
        g.controller_header(),
        g.rng.random() < 0.5,
        [StopReplicaTopic(g.controller_topic(), partitions)],
    )


def _offsets_for_leader_epoch(g: RequestGenerator) -> OffsetsForLeaderEpochRequest:
    topics = [
        EpochQueryTopic(name, [EpochQuery(p, g.epoch(), g.epoch()) for p in partitions])
        for name, partitions in g.topic_partitions()
    ]
    return OffsetsForLeaderEpochRequest(topics, g.rng.choice([-1, g.target.broker_id, 99]))


def _init_producer_id(g: RequestGenerator) -> InitProducerIdRequest:
    if g.is_hostile():
        return InitProducerIdRequest(
            g.rng.choice([None, "txn"]),
            g.int32(0, 1000),
            g.int64(0, 10),
            g.rng.choice([-2, -1, 0, 1, INT16_MAX]),
        )
    return InitProducerIdRequest()


def _controlled_shutdown(g: RequestGenerator) -> ControlledShutdownRequest:
    """Never with the broker's real id and epoch: that would really shut it down."""
    real = g.target.broker_epoch
    return ControlledShutdownRequest(
        g.rng.choice([g.target.broker_id, 99, -1]), g.rng.choice([real - 1, -1, 0, INT64_MAX])
    )


def _sasl_handshake(g: RequestGenerator) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(g.rng.choice(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "", "x"]))


def _sasl_authenticate(g: RequestGenerator) -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(g.rng.choice([b"", b"n,,n=u,r=abc", b"\x00u\x00p", b"\xff" * 9]))


def _acl_code(g: RequestGenerator, valid: Sequence[int]) -> int:
    """One of Kafka's valid codes for a field, or (hostile) UNKNOWN, ANY or out of range."""
    return g.rng.choice([0, 1, 99, -1]) if g.is_hostile() else g.rng.choice(list(valid))


def _acl_binding(g: RequestGenerator) -> WireAclBinding:
    principal = "User:" + g.rng.choice(FUZZ_USERS)
    if g.is_hostile():
        principal = g.rng.choice(HOSTILE_PRINCIPALS)
    return WireAclBinding(
        _acl_code(g, [2, 3, 4]),
        g.rng.choice([g.topic()[0], "fuzz-", "*", "kafka-cluster"]),
        _acl_code(g, [3, 4]),
        principal,
        g.rng.choice(["*", "127.0.0.1"]),
        _acl_code(g, range(2, 12)),
        _acl_code(g, [2, 3]),
    )


def _acl_filter(g: RequestGenerator) -> AclFilter:
    return AclFilter(
        _acl_code(g, [1, 2, 3, 4]),
        g.rng.choice([None, g.topic()[0], "fuzz-", "*"]),
        _acl_code(g, [1, 2, 3, 4]),
        g.rng.choice([None, "User:" + g.rng.choice(FUZZ_USERS)]),
        g.rng.choice([None, "*"]),
        _acl_code(g, range(1, 12)),
        _acl_code(g, [1, 2, 3]),
    )


def _describe_acls(g: RequestGenerator) -> DescribeAclsRequest:
    return DescribeAclsRequest(_acl_filter(g))


def _create_acls(g: RequestGenerator) -> CreateAclsRequest:
    return CreateAclsRequest([_acl_binding(g) for _ in range(g.rng.randint(1, 3))])


def _delete_acls(g: RequestGenerator) -> DeleteAclsRequest:
    return DeleteAclsRequest([_acl_filter(g) for _ in range(g.rng.randint(1, 2))])


def _scram_user(g: RequestGenerator) -> str:
    return g.rng.choice(HOSTILE_USERS if g.is_hostile() else FUZZ_USERS)


def _describe_user_scram_credentials(g: RequestGenerator) -> DescribeUserScramCredentialsRequest:
    if g.rng.random() < 0.3:
        return DescribeUserScramCredentialsRequest(None)
    return DescribeUserScramCredentialsRequest([_scram_user(g) for _ in range(g.rng.randint(0, 2))])


def _alter_user_scram_credentials(g: RequestGenerator) -> AlterUserScramCredentialsRequest:
    mechanisms = [0, 1, 2, 3, -1] if g.is_hostile() else [1, 2]
    deletions = [
        ScramDeletion(_scram_user(g), g.rng.choice(mechanisms)) for _ in range(g.rng.randint(0, 1))
    ]
    upsertions = [
        ScramUpsertion(
            _scram_user(g),
            g.rng.choice(mechanisms),
            g.int32(4096, 8192),
            g.rng.randbytes(g.rng.choice([16, 32, 0] if g.is_hostile() else [16, 32])),
            g.rng.randbytes(g.rng.choice([32, 64, 0, 5] if g.is_hostile() else [32, 64])),
        )
        for _ in range(g.rng.randint(0, 2))
    ]
    return AlterUserScramCredentialsRequest(deletions, upsertions)


def _write_txn_markers(g: RequestGenerator) -> WriteTxnMarkersRequest:
    """Markers on scratch or unknown topics only: a fuzzed marker never ends a
    transaction of the topics other tests read."""
    markers = [
        TxnMarkerRequestEntry(
            g.int64(-1, 2**40),
            g.rng.choice([-1, 0, INT16_MAX]) if g.is_hostile() else 0,
            g.rng.random() < 0.5,
            g.int32(-1, 10),
            [
                MarkerTopic(
                    g.rng.choice([*SCRATCH_TOPICS, *UNKNOWN_TOPICS]),
                    [g.int32(-1, MAX_SCRATCH_PARTITIONS) for _ in range(g.rng.randint(0, 2))],
                )
            ],
        )
        for _ in range(g.rng.randint(0, 2))
    ]
    return WriteTxnMarkersRequest(markers, g.int32(0, 1000))


# The transactional ids and group of fuzzed transaction requests: never another test's.
FUZZ_TRANSACTIONAL_IDS = ("fuzz-txn", "fuzz-txn-other")
HOSTILE_TRANSACTIONAL_IDS = ("", "\udcff", "x" * 300)
FUZZ_GROUP = "fuzz-group"


def _transactional_id(g: RequestGenerator) -> str:
    return g.rng.choice(HOSTILE_TRANSACTIONAL_IDS if g.is_hostile() else FUZZ_TRANSACTIONAL_IDS)


def _txn_producer(g: RequestGenerator) -> tuple[str, int, int]:
    epoch = g.rng.choice([-1, 0, INT16_MAX]) if g.is_hostile() else 0
    return _transactional_id(g), g.int64(-1, 2**40), epoch


def _scratch_partitions(g: RequestGenerator) -> list[tuple[str, list[int]]]:
    """Scratch or unknown topics only: a fuzzed transaction never marks another test's."""
    return [
        (
            g.rng.choice([*SCRATCH_TOPICS, *UNKNOWN_TOPICS]),
            [g.int32(-1, MAX_SCRATCH_PARTITIONS) for _ in range(g.rng.randint(0, 2))],
        )
        for _ in range(g.rng.randint(0, 2))
    ]


def _find_coordinator(g: RequestGenerator) -> FindCoordinatorRequest:
    key_type = g.rng.choice([0, 1, 2, -1]) if g.is_hostile() else g.rng.choice([0, 1])
    key = FUZZ_GROUP if key_type == 0 else _transactional_id(g)
    return FindCoordinatorRequest(key, key_type)


def _add_partitions_to_txn(g: RequestGenerator) -> AddPartitionsToTxnRequest:
    topics = [TxnTopic(name, partitions) for name, partitions in _scratch_partitions(g)]
    return AddPartitionsToTxnRequest(*_txn_producer(g), topics)


def _add_offsets_to_txn(g: RequestGenerator) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(*_txn_producer(g), FUZZ_GROUP)


def _end_txn(g: RequestGenerator) -> EndTxnRequest:
    return EndTxnRequest(*_txn_producer(g), g.rng.random() < 0.5)


def _txn_offset_commit(g: RequestGenerator) -> TxnOffsetCommitRequest:
    transactional_id, producer_id, epoch = _txn_producer(g)
    topics = [
        TxnOffsetTopic(
            name,
            [TxnOffset(p, g.int64(-1, 100), g.epoch(), "m" * g.rng.choice([0, 5])) for p in parts],
        )
        for name, parts in _scratch_partitions(g)
    ]
    return TxnOffsetCommitRequest(
        transactional_id, FUZZ_GROUP, producer_id, epoch, topics, g.int32(-1, 3)
    )


def _register_sink_participants(g: RequestGenerator) -> RegisterSinkParticipantsRequest:
    """Participants with derived ids (2**62 up) or not, on scratch or unknown topics."""
    topics = [
        SinkParticipantTopic(
            name, [SinkParticipant(p, g.int64(2**62, 2**63 - 1), 0) for p in partitions]
        )
        for name, partitions in _scratch_partitions(g)
    ]
    return RegisterSinkParticipantsRequest(*_txn_producer(g), g.int64(-1, 5), topics)


REQUEST_GENERATORS: dict[ApiKey, Callable[[RequestGenerator], Any]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.API_VERSIONS: _api_versions,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.LEADER_AND_ISR: _leader_and_isr,
    ApiKey.UPDATE_METADATA: _update_metadata,
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: _offsets_for_leader_epoch,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.STOP_REPLICA: _stop_replica,
    ApiKey.CONTROLLED_SHUTDOWN: _controlled_shutdown,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.SASL_HANDSHAKE: _sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: _sasl_authenticate,
    ApiKey.DESCRIBE_ACLS: _describe_acls,
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.REGISTER_SINK_PARTICIPANTS: _register_sink_participants,
}


@cache
def _sample_batches() -> list[bytes]:
    """A few valid record batches, built once (building one costs far more than sending).

    Timestamps are fixed so that the frames are a function of the seed alone.
    """
    stamp = 1_700_000_000_000
    return [
        build_batch(["fuzz-1", "fuzz-2"], keys=["a", None], timestamps=[stamp, stamp + 1]),
        build_batch([b"", None, b"\x00" * 100], keys=[None, b"k", b""], timestamps=[stamp] * 3),
        build_batch(["v"] * 20, timestamps=[stamp] * 20, compression="zstd"),
        build_batch(["x"], timestamps=[stamp], producer_id=7, producer_epoch=0, base_sequence=0),
    ]


# --------------------------------------------------------------------------- encoding


def body_of(request: Any, writer: Writer | None = None) -> bytes:
    """The encoded body of a request, into `writer` if given (to read its marks)."""
    writer = Writer() if writer is None else writer
    request.write(writer)
    return writer.getvalue()


def header_bytes(
    api_key: int, correlation_id: int, *, version: int = 0, client_id: str | None = "fuzz"
) -> bytes:
    writer = Writer()
    RequestHeader(api_key, version, correlation_id, client_id).write(writer)
    return writer.getvalue()


def frame(payload: bytes | bytearray) -> bytes:
    """Prefix a payload (header and body) with its size."""
    return SIZE.pack(len(payload)) + bytes(payload)


def request_frame(
    api_key: int,
    body: bytes,
    correlation_id: int,
    *,
    version: int = 0,
    client_id: str | None = "fuzz",
) -> bytes:
    header = header_bytes(api_key, correlation_id, version=version, client_id=client_id)
    return frame(header + body)


def all_api_keys() -> Sequence[ApiKey]:
    return list(REQUEST_GENERATORS)
