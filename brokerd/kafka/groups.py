"""The group APIs of the Kafka listener, by api key: requests in, the coordinator's
(brokerd/groups/, on the core) answers out, errors where each response layout has room for them.
FindCoordinator, for groups and transactional ids alike, is brokerd/kafka/find_coordinator.py.

Authorization follows Kafka (brokerd/core/authorization.py): DescribeGroups and
OffsetFetch need Describe on the group, the membership APIs and OffsetCommit Read,
DeleteGroups Delete; OffsetCommit also needs Read on each topic and
OffsetFetch Describe. OffsetFetch with require_stable (v7+) answers
UNSTABLE_OFFSET_COMMIT for a partition an open transaction holds an offset of
(TxnOffsetCommit, brokerd/kafka/txn_offset_commit.py). Byte fields are copied out of
the request frame before the coordinator keeps them: the frame's buffer is reused for
the next request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial

from brokerd.core.authorization import (
    authorize_cluster,
    authorize_group,
    authorize_topic,
    group_denied,
    topic_denied,
)
from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.groups.members import ErrorType, JoinRequest
from brokerd.kafka.request import KafkaHandler, KafkaRequest
from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    code_of,
)
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.offsets_records import OffsetValue
from spark_replica.wire.schema import Data

NO_OFFSET = -1
# Errors a handler answers in place of a result.
_ANSWERED = BrokerResponseError


def _groups(coordinator: GroupCoordinator | None) -> GroupCoordinator:
    if coordinator is None:
        raise CoordinatorNotAvailableError("this broker runs no group coordinator")
    return coordinator


def _code(error: ErrorType | None) -> int:
    return 0 if error is None else error.code


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------


async def handle_join_group(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    flexible_names = request.version >= 7
    answer = Data(
        throttle_time_ms=0,
        error_code=0,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if flexible_names else "",
        leader="",
        member_id=body.member_id,
        members=[],
    )
    if not authorize_group(ctx, request, Operation.READ, body.group_id):
        answer.error_code = group_denied(request, Operation.READ, body.group_id).code
        return answer
    # v0 has no rebalance timeout: the session timeout bounds the rebalance, as in Kafka.
    rebalance_timeout = body.rebalance_timeout_ms
    if rebalance_timeout <= 0:
        rebalance_timeout = body.session_timeout_ms
    join = JoinRequest(
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
        client_id=request.client_id or "",
        client_host=f"/{request.client_host}",
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout
        if rebalance_timeout > 0
        else body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=request.version >= 4,
    )
    try:
        result = await _groups(coordinator).join(body.group_id, join)
    except _ANSWERED as exc:
        answer.error_code = code_of(exc)
        return answer
    answer.error_code = _code(result.error)
    answer.member_id = result.member_id
    if result.error is not None:
        return answer
    answer.generation_id = result.generation
    answer.protocol_type = result.protocol_type
    answer.protocol_name = result.protocol_name if flexible_names else result.protocol_name or ""
    answer.leader = result.leader
    answer.members = [
        Data(member_id=member_id, group_instance_id=instance, metadata=metadata)
        for member_id, instance, metadata in result.members
    ]
    return answer


async def handle_sync_group(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    answer = Data(
        throttle_time_ms=0, error_code=0, protocol_type=None, protocol_name=None, assignment=b""
    )
    if not authorize_group(ctx, request, Operation.READ, body.group_id):
        answer.error_code = group_denied(request, Operation.READ, body.group_id).code
        return answer
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    try:
        result = await _groups(coordinator).sync(
            body.group_id,
            body.member_id,
            body.generation_id,
            body.group_instance_id,
            assignments,
            body.protocol_type,
            body.protocol_name,
        )
    except _ANSWERED as exc:
        answer.error_code = code_of(exc)
        return answer
    answer.error_code = _code(result.error)
    if result.error is None:
        answer.protocol_type = result.protocol_type
        answer.protocol_name = result.protocol_name
        answer.assignment = result.assignment
    return answer


async def handle_heartbeat(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    if not authorize_group(ctx, request, Operation.READ, body.group_id):
        return Data(
            throttle_time_ms=0,
            error_code=group_denied(request, Operation.READ, body.group_id).code,
        )
    try:
        error = _groups(coordinator).heartbeat(
            body.group_id, body.member_id, body.generation_id, body.group_instance_id
        )
    except _ANSWERED as exc:
        return Data(throttle_time_ms=0, error_code=code_of(exc))
    return Data(throttle_time_ms=0, error_code=_code(error))


async def handle_leave_group(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    if request.version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    answer = Data(throttle_time_ms=0, error_code=0, members=[])
    if not authorize_group(ctx, request, Operation.READ, body.group_id):
        answer.error_code = group_denied(request, Operation.READ, body.group_id).code
        return answer
    try:
        errors = _groups(coordinator).leave(body.group_id, leaving)
    except _ANSWERED as exc:
        answer.error_code = code_of(exc)
        return answer
    if request.version < 3:
        answer.error_code = _code(errors[0])
        return answer
    answer.members = [
        Data(member_id=member_id, group_instance_id=instance, error_code=_code(error))
        for (member_id, instance), error in zip(leaving, errors, strict=True)
    ]
    return answer


# -- OffsetCommit, OffsetFetch --------------------------------------------------------


async def handle_offset_commit(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    group_allowed = authorize_group(ctx, request, Operation.READ, body.group_id)
    now_ms = int(time.time() * 1000)
    max_metadata = ctx.config.offset_metadata_max_bytes
    accepted: list[tuple[TopicPartition, Data]] = []  # answered by the commit's outcome
    commits: dict[TopicPartition, OffsetValue] = {}
    topics = []
    for topic in body.topics:
        topic_allowed = authorize_topic(ctx, request, Operation.READ, topic.name)
        answer = Data(name=topic.name, partitions=[])
        for entry in topic.partitions:
            tp = TopicPartition(topic.name, entry.partition_index)
            metadata = entry.committed_metadata or ""
            error: BrokerResponseError | None = None
            if not group_allowed:
                error = group_denied(request, Operation.READ, body.group_id)
            elif not topic_allowed:
                error = topic_denied(request, Operation.READ, topic.name)
            elif tp not in ctx.metadata.partitions:
                error = UnknownTopicOrPartitionError(f"{tp} does not exist")
            elif len(metadata.encode("utf-8", "surrogateescape")) > max_metadata:
                error = OffsetMetadataTooLargeError(
                    f"metadata over offset.metadata.max.bytes={max_metadata}"
                )
            partition = Data(partition_index=entry.partition_index, error_code=0)
            committed = OffsetValue(
                entry.committed_offset, entry.committed_leader_epoch, metadata, now_ms
            )
            if error is None:
                commits[tp] = committed
                accepted.append((tp, partition))
            else:
                partition.error_code = error.code
            answer.partitions.append(partition)
        topics.append(answer)
    if group_allowed:
        try:
            await _groups(coordinator).commit(
                body.group_id, body.member_id, body.generation_id, body.group_instance_id, commits
            )
        except _ANSWERED as exc:
            for _, partition in accepted:
                partition.error_code = code_of(exc)
    return Data(throttle_time_ms=0, topics=topics)


async def handle_offset_fetch(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    body = request.body
    answer = Data(throttle_time_ms=0, error_code=0, topics=[])
    group_error: BaseException | None = None
    committed: dict[TopicPartition, OffsetValue] = {}
    if not authorize_group(ctx, request, Operation.DESCRIBE, body.group_id):
        group_error = group_denied(request, Operation.DESCRIBE, body.group_id)
    else:
        try:
            committed = await _groups(coordinator).committed(body.group_id)
        except _ANSWERED as exc:
            group_error = exc
    if group_error is not None and request.version >= 2:
        answer.error_code = code_of(group_error)
        return answer
    if body.topics is None:
        wanted: dict[str, list[int]] = {}
        for tp in sorted(committed):
            if authorize_topic(ctx, request, Operation.DESCRIBE, tp.topic):
                wanted.setdefault(tp.topic, []).append(tp.partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in body.topics}
    for name, partitions in wanted.items():
        denied = group_error is None and not authorize_topic(ctx, request, Operation.DESCRIBE, name)
        topic = Data(name=name, partitions=[])
        for index in partitions:
            found = committed.get(TopicPartition(name, index))
            partition = Data(
                partition_index=index,
                committed_offset=NO_OFFSET,
                committed_leader_epoch=-1,
                metadata="",
                error_code=0,
            )
            if group_error is not None:
                partition.error_code = code_of(group_error)
            elif denied:
                partition.error_code = topic_denied(request, Operation.DESCRIBE, name).code
            elif body.require_stable and _groups(coordinator).has_unstable_offset(
                body.group_id, TopicPartition(name, index)
            ):
                partition.error_code = UnstableOffsetCommitError.code
            elif found is not None:
                partition.committed_offset = found.offset
                partition.committed_leader_epoch = found.leader_epoch
                partition.metadata = found.metadata
            topic.partitions.append(partition)
        answer.topics.append(topic)
    return answer


# -- DescribeGroups, ListGroups, DeleteGroups -------------------------------------------


async def handle_describe_groups(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    described = []
    for group_id in request.body.groups:
        entry = Data(
            error_code=0,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
        )
        try:
            if not authorize_group(ctx, request, Operation.DESCRIBE, group_id):
                raise group_denied(request, Operation.DESCRIBE, group_id)
            summary = await _groups(coordinator).describe(group_id)
        except _ANSWERED as exc:
            entry.error_code = code_of(exc)
            described.append(entry)
            continue
        entry.group_state = summary.state
        entry.protocol_type = summary.protocol_type
        entry.protocol_data = summary.protocol_name
        entry.members = [
            Data(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in summary.members
        ]
        described.append(entry)
    return Data(throttle_time_ms=0, groups=described)


async def handle_list_groups(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    states = {s.lower() for s in request.body.states_filter}
    try:
        listed = await _groups(coordinator).list_groups()
    except _ANSWERED as exc:
        return Data(throttle_time_ms=0, error_code=code_of(exc), groups=[])
    everything = authorize_cluster(ctx, request, Operation.DESCRIBE)
    groups = [
        Data(group_id=group_id, protocol_type=protocol_type, group_state=state)
        for group_id, protocol_type, state in listed
        if (not states or state.lower() in states)
        and (everything or authorize_group(ctx, request, Operation.DESCRIBE, group_id))
    ]
    return Data(throttle_time_ms=0, error_code=0, groups=groups)


async def handle_delete_groups(
    coordinator: GroupCoordinator | None, ctx: BrokerContext, request: KafkaRequest
) -> Data:
    results = []
    for group_id in request.body.groups_names:
        result = Data(group_id=group_id, error_code=0)
        try:
            if not authorize_group(ctx, request, Operation.DELETE, group_id):
                raise group_denied(request, Operation.DELETE, group_id)
            await _groups(coordinator).delete(group_id)
        except _ANSWERED as exc:
            result.error_code = code_of(exc)
        results.append(result)
    return Data(throttle_time_ms=0, results=results)


# A group API's handler: the coordinator (None: this broker runs none), then as any.
GroupHandler = Callable[[GroupCoordinator | None, BrokerContext, KafkaRequest], Awaitable[Data]]

_GROUP_APIS: dict[int, GroupHandler] = {
    8: handle_offset_commit,
    9: handle_offset_fetch,
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
    42: handle_delete_groups,
}


def group_handlers(groups: GroupCoordinator | None) -> dict[int, KafkaHandler]:
    """The group APIs' handlers, bound to the broker's coordinator."""
    return {key: partial(handler, groups) for key, handler in _GROUP_APIS.items()}
