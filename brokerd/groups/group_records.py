"""A group's membership as the offsets topic stores it, and back: pure.

What is stored is what a coordinator failover must not lose: the generation, the
protocol, the leader and each member with its session timeout, subscription and
assignment. A group restored from it is Stable with the same generation when it had
members, so that members heartbeating or committing with that generation carry on
without a rebalance, and static members keep their member ids; its members' sessions
start again at the restore (they heartbeat within their session timeout, or expire).
Only the chosen protocol's subscription is stored, as in Kafka.
"""

from __future__ import annotations

from brokerd.groups.members import GroupLimits, GroupState, Member
from brokerd.groups.membership import Group
from spark_replica.wire.kafka.offsets_records import GroupValue, StoredMember


def group_value(group: Group, now_ms: int) -> GroupValue:
    """The record of `group` as it is now (Stable or Empty: between rebalances)."""
    protocol = group.protocol_name
    members = tuple(
        StoredMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            subscription=m.metadata_for(protocol or ""),
            assignment=m.assignment,
        )
        for m in group.members.values()
    )
    return GroupValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation,
        protocol=protocol if members else None,
        leader=group.leader if members else None,
        current_state_timestamp_ms=now_ms,
        members=members,
    )


def restore_group(
    group_id: str, value: GroupValue, limits: GroupLimits, monotonic_now_ms: float
) -> Group:
    """The group a stored record describes, its sessions starting at `monotonic_now_ms`."""
    group = Group(group_id, limits)
    group.generation = value.generation
    group.protocol_type = value.protocol_type or None
    if not value.members or value.protocol is None:
        return group
    group.protocol_name = value.protocol
    for stored in value.members:
        group.members[stored.member_id] = Member(
            member_id=stored.member_id,
            group_instance_id=stored.group_instance_id,
            client_id=stored.client_id,
            client_host=stored.client_host,
            session_timeout_ms=stored.session_timeout_ms,
            rebalance_timeout_ms=stored.rebalance_timeout_ms,
            protocol_type=value.protocol_type,
            protocols=((value.protocol, stored.subscription),),
            last_heartbeat_ms=monotonic_now_ms,
            assignment=stored.assignment,
        )
        if stored.group_instance_id is not None:
            group.static_members[stored.group_instance_id] = stored.member_id
    group.leader = value.leader if value.leader in group.members else next(iter(group.members))
    group.state = GroupState.STABLE
    return group
