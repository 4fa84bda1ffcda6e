"""Kafka's DescribeAcls, CreateAcls and DeleteAcls: the same ACLs as `replog acls`.

The work is brokerd/core/acl_admin.py's, shared with the replog listener; here the
Kafka layouts are translated to its wire model and back, and the caller is authorized
as Kafka does: Describe on the cluster to describe, Alter on the cluster to create or
delete. A refusal is answered where the layout has room: DescribeAcls's top-level error,
every CreateAcls result, every DeleteAcls filter result (CLUSTER_AUTHORIZATION_FAILED).
Describe groups the matching ACLs by resource pattern, as Kafka's answer does.
"""

from __future__ import annotations

from functools import partial
from itertools import groupby

from brokerd.core import acl_admin
from brokerd.core.authorization import authorize_cluster, cluster_denied
from brokerd.core.context import BrokerContext
from brokerd.core.partitions import SERVING_ERRORS, set_error
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import code_of, wire_message
from spark_replica.security.acl import Operation
from spark_replica.wire.native.acls import (
    AclFilter,
    WireAclBinding,
    binding_from_wire,
    binding_to_wire,
    check_filter,
    filter_matches,
)
from spark_replica.wire.schema import Data


def _filter(data: Data) -> AclFilter:
    return AclFilter(
        data.resource_type_filter,
        data.resource_name_filter,
        data.pattern_type_filter,
        data.principal_filter,
        data.host_filter,
        data.operation,
        data.permission_type,
    )


def _matcher(data: Data) -> acl_admin.AclMatcher:
    """The filter's predicate; InvalidRequestError for a filter that matches nothing
    well defined (Kafka's codes are replog's, so its checks are the same)."""
    f = _filter(data)
    check_filter(f)
    return partial(filter_matches, f)


def _creation(data: Data) -> WireAclBinding:
    return WireAclBinding(
        data.resource_type,
        data.resource_name,
        data.resource_pattern_type,
        data.principal,
        data.host,
        data.operation,
        data.permission_type,
    )


def _entry(wire: WireAclBinding) -> Data:
    return Data(
        principal=wire.principal,
        host=wire.host,
        operation=wire.operation,
        permission_type=wire.permission,
    )


async def handle_describe_acls(ctx: BrokerContext, request: KafkaRequest) -> Data:
    answer = Data(throttle_time_ms=0, error_code=0, error_message=None, resources=[])
    try:
        if not authorize_cluster(ctx, request, Operation.DESCRIBE):
            raise cluster_denied(request, Operation.DESCRIBE)
        bindings = await acl_admin.describe_acls(ctx, _matcher(request.body))
    except SERVING_ERRORS as exc:
        set_error(answer, exc)
        return answer
    wires = [binding_to_wire(binding) for binding in bindings]

    def pattern(wire: WireAclBinding) -> tuple[int, str, int]:
        return wire.resource_type, wire.resource_name, wire.pattern_type

    answer.resources = [
        Data(
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=[_entry(wire) for wire in same],
        )
        for (resource_type, name, pattern_type), same in groupby(wires, key=pattern)
    ]
    return answer


async def handle_create_acls(ctx: BrokerContext, request: KafkaRequest) -> Data:
    creations = [_creation(data) for data in request.body.creations]
    try:
        if not authorize_cluster(ctx, request, Operation.ALTER):
            raise cluster_denied(request, Operation.ALTER)
        created = await acl_admin.create_acls(
            ctx, acl_admin.each_or_error(binding_from_wire, creations)
        )
    except SERVING_ERRORS as exc:
        results = [_error_result(exc) for _ in creations]
    else:
        results = [
            Data(error_code=0, error_message=None)
            if r.error is None
            else Data(error_code=code_of(r.error), error_message=wire_message(r.error))
            for r in created
        ]
    return Data(throttle_time_ms=0, results=results)


async def handle_delete_acls(ctx: BrokerContext, request: KafkaRequest) -> Data:
    filters = request.body.filters
    try:
        if not authorize_cluster(ctx, request, Operation.ALTER):
            raise cluster_denied(request, Operation.ALTER)
        deleted = await acl_admin.delete_acls(ctx, acl_admin.each_or_error(_matcher, filters))
    except SERVING_ERRORS as exc:
        results = [_error_result(exc, matching_acls=[]) for _ in filters]
    else:
        results = [
            Data(
                error_code=0 if result.error is None else code_of(result.error),
                error_message=None if result.error is None else wire_message(result.error),
                matching_acls=[_matching(binding_to_wire(b)) for b in result.matched],
            )
            for result in deleted
        ]
    return Data(throttle_time_ms=0, filter_results=results)


def _matching(wire: WireAclBinding) -> Data:
    return Data(
        error_code=0,
        error_message=None,
        resource_type=wire.resource_type,
        resource_name=wire.resource_name,
        pattern_type=wire.pattern_type,
        principal=wire.principal,
        host=wire.host,
        operation=wire.operation,
        permission_type=wire.permission,
    )


def _error_result(error: BaseException, **fields: object) -> Data:
    result = Data(error_code=0, error_message=None, **fields)
    set_error(result, error)
    return result
