"""Which broker coordinates a group: a pure function of the group id and the live brokers.

Every broker computes the same answer from the same metadata (the controller's
UpdateMetadata keeps the live set in step), so no election is needed. When the
coordinator dies, UpdateMetadata drops it from the live set and the group hashes onto
another broker, which loads the group's offsets from ZooKeeper. CRC-32 is stable across
processes and Python versions, unlike hash().

A broker answers for groups only once the controller's metadata names it live: before
that (just started, or dropped by the controller) its view of the live set is not the
one the other brokers hash with, and counting itself in would make it claim groups that
another broker coordinates. The brokers' views still differ for the moment an
UpdateMetadata takes to reach them all; the fence on each group's znode
(spark_replica.zk.group_store) keeps a stale coordinator's commits out meanwhile.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from spark_replica.errors import (
    BrokerResponseError,
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
)


def coordinator_for(group_id: str, live_broker_ids: Iterable[int]) -> int | None:
    """The coordinating broker's id, or None when no broker is live."""
    ids = sorted(set(live_broker_ids))
    if not ids:
        return None
    index = zlib.crc32(group_id.encode("utf-8", "surrogateescape")) % len(ids)
    return ids[index]


def serves_groups(own_id: int | None, live_broker_ids: Iterable[int]) -> bool:
    """Whether this broker (`own_id`, None until registered) may coordinate any group:
    only once the controller's live set, the one every broker hashes with, includes it."""
    return own_id is not None and own_id in set(live_broker_ids)


def not_serving_error(
    own_id: int | None, live_broker_ids: Iterable[int]
) -> type[BrokerResponseError] | None:
    """What group requests get while this broker does not serve groups (None when it
    does): COORDINATOR_LOAD_IN_PROGRESS before any metadata (starting: retry here),
    NOT_COORDINATOR when the metadata leaves it out (others coordinate: look again)."""
    live = set(live_broker_ids)
    if serves_groups(own_id, live):
        return None
    return NotCoordinatorError if live else CoordinatorLoadInProgressError
