"""What a consumer group's members are and what passes between them and their group.

The records the membership state machine (membership.py) keeps per member, the requests
it is given (JoinRequest) and the answers it gives (JoinResult, SyncResult, delivered
through Replies), its states and limits. Pure data: no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from spark_replica.errors import BrokerResponseError

ErrorType = type[BrokerResponseError]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupLimits:
    max_size: int = 2**31 - 1
    # How long the first rebalance of an empty group waits for more members to arrive,
    # so that a fleet starting together does not rebalance once per member.
    initial_rebalance_delay_ms: int = 0


@dataclass(frozen=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]  # (name, metadata), most preferred first
    require_known_member_id: bool  # JoinGroup v4+: a new member first gets its id


@dataclass(frozen=True)
class JoinResult:
    member_id: str
    error: ErrorType | None = None
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # (member id, group instance id, metadata) of every member: for the leader only.
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: ErrorType | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Replies:
    """Answers one call produced: the caller's own (None: it waits) and the waiting
    requests of other members that the call completed, by member id."""

    member_id: str = ""
    own_join: JoinResult | None = None
    own_sync: SyncResult | None = None
    joins: dict[str, JoinResult] = field(default_factory=dict)
    syncs: dict[str, SyncResult] = field(default_factory=dict)

    def merge(self, other: Replies) -> None:
        self.joins.update(other.joins)
        self.syncs.update(other.syncs)

    def claim_own(self) -> Replies:
        """Move the caller's answer, if this call produced it, out of the others'."""
        if self.own_join is None:
            self.own_join = self.joins.pop(self.member_id, None)
        if self.own_sync is None:
            self.own_sync = self.syncs.pop(self.member_id, None)
        return self


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    last_heartbeat_ms: float
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata_for(self, protocol: str) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    def session_deadline_ms(self) -> float | None:
        """When the session expires; None while a waiting request keeps it alive."""
        if self.awaiting_join or self.awaiting_sync:
            return None
        return self.last_heartbeat_ms + self.session_timeout_ms


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"
