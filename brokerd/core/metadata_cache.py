"""What this broker tells clients about the cluster: the controller's last UpdateMetadata.

Each UpdateMetadata carries the live brokers and the state of every partition, and
replaces the cache whole, so the cache is exactly one controller decision old at most.
The states are kept by topic as well, sorted by partition, because every Metadata request
asks by topic: finding a topic's partitions among all of them cost a scan of the whole
cluster per topic asked for (10 topics of 10,000 partitions: 100,000 looks per request).

Before the first UpdateMetadata the cache knows no controller, no other broker and no
topic. A broker is registered, and its listeners accept connections, a moment before the
controller's first UpdateMetadata reaches it; longer when that request came before the
registration was complete and is sent again (brokerd/native/controller_requests.py).
`wait_for_first_update` lets a handler wait that moment out rather than answer from the
empty cache: every Metadata request, in either dialect, waits through `ready_to_describe`.
An answer from the empty cache names no controller and no broker but this one, and
clients take it for the cluster (librdkafka's admin client then drops its other bootstrap
brokers and waits for a controller, asking again only when a connection changes state,
so its CreateTopics was never sent). Past the wait the answer is what the broker knows,
as a Kafka broker's would be. Handlers that must answer only once the cache shows a
change (CreateTopics: brokerd/core/leader_wait.py) wait for its `next_update`. Owned by
the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from spark_replica.topics import TopicPartition
from spark_replica.wire.native.controller_requests import (
    PartitionLeaderState,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo

# Registering to the first UpdateMetadata takes milliseconds, a few hundred when the
# controller's first request came before the registration was complete and is sent
# again, seconds on a loaded machine; well under the clients' request timeouts (30 s+).
FIRST_UPDATE_WAIT_S = 10.0

logger = logging.getLogger("brokerd.metadata")


@dataclass
class MetadataCache:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionLeaderState] = field(default_factory=dict)
    controller_id: int = -1
    _by_topic: dict[str, list[PartitionLeaderState]] = field(default_factory=dict)
    # Set by the first update, for good.
    _first: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by the next update and then replaced: whoever waits on it wakes once per update.
    _updated: asyncio.Event = field(default_factory=asyncio.Event)

    def update(self, request: UpdateMetadataRequest) -> None:
        self.brokers = {b.broker_id: b for b in request.brokers}
        self.partitions = {
            TopicPartition(topic.topic, p.partition): p
            for topic in request.topics
            for p in topic.partitions
        }
        by_topic: dict[str, list[PartitionLeaderState]] = {}
        for topic in request.topics:
            by_topic.setdefault(topic.topic, []).extend(topic.partitions)
        for states in by_topic.values():
            states.sort(key=lambda state: state.partition)
        self._by_topic = by_topic
        self.controller_id = request.header.controller_id
        self._first.set()
        self._updated.set()
        self._updated = asyncio.Event()

    async def wait_for_first_update(self, timeout_s: float) -> bool:
        """Whether the cache has had an update, waiting up to `timeout_s` for the first."""
        if not self._first.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), timeout_s)
        return self._first.is_set()

    async def ready_to_describe(self) -> None:
        """Return once the cache has had the controller's word, or FIRST_UPDATE_WAIT_S has
        passed (the answer is then what the broker knows); a Metadata request's first step."""
        if not await self.wait_for_first_update(FIRST_UPDATE_WAIT_S):
            logger.warning(
                "answering Metadata without the controller's metadata: none came in %.0f s",
                FIRST_UPDATE_WAIT_S,
            )

    async def next_update(self) -> None:
        await self._updated.wait()

    def topics(self) -> list[str]:
        return sorted(self._by_topic)

    def partitions_of(self, topic: str) -> list[PartitionLeaderState]:
        return list(self._by_topic.get(topic, ()))

    def has_leaders(self, topic: str, partitions: int) -> bool:
        """Whether partitions 0 to `partitions` - 1 of `topic` are known, each with a leader."""
        states = self._by_topic.get(topic, [])[:partitions]
        return len(states) == partitions and all(state.leader >= 0 for state in states)
