"""Which broker coordinates a group: a pure function of the group id and the live brokers.

Every broker computes the same answer from the same metadata (the controller's
UpdateMetadata keeps the live set in step), so no election or znode is needed. When the
coordinator dies, UpdateMetadata drops it from the live set and the group hashes onto
another broker, which loads the group's offsets from ZooKeeper. CRC-32 is stable across
processes and Python versions, unlike hash().
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable


def coordinator_for(group_id: str, live_broker_ids: Iterable[int]) -> int | None:
    """The coordinating broker's id, or None when no broker is live."""
    ids = sorted(set(live_broker_ids))
    if not ids:
        return None
    index = zlib.crc32(group_id.encode("utf-8", "surrogateescape")) % len(ids)
    return ids[index]
