"""High watermarks of partitions this broker hosts no replica of, asked of their leaders,
for the lag of the consumer groups it coordinates (the metrics only, never an answer).

A coordinator knows the high watermark of the partitions it hosts. For the others that
its groups committed offsets on, `refresh` asks each leader (ListOffsets LATEST, which a
leader answers with its high watermark), one request per leader, every REFRESH_MS of the
broker's housekeeping, over the inter-broker security settings. What a round does not
learn (no leader known, a leader unreachable, an error for a partition) is left out
until a round does: a lag is served from the latest round's answer or not at all,
never from an older one. Owned by the broker's event loop; `known` is read at scrape
time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from spark_replica.client.connection import BrokerConnection
from spark_replica.errors import ReplogError
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext

logger = logging.getLogger("brokerd.groups")

REFRESH_MS = 5_000
ASK_TIMEOUT_S = 5.0


def by_leader(
    wanted: Iterable[TopicPartition], leaders: Mapping[TopicPartition, int]
) -> dict[int, list[TopicPartition]]:
    """The wanted partitions grouped by their leader; those without one are left out."""
    grouped: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in sorted(set(wanted)):
        leader = leaders.get(tp, -1)
        if leader >= 0:
            grouped[leader].append(tp)
    return dict(grouped)


class RemoteHighWatermarks:
    def __init__(self, ctx: BrokerContext, wanted: Callable[[], Iterable[TopicPartition]]) -> None:
        self.ctx = ctx
        self._wanted = wanted  # the partitions the coordinated groups committed to
        self.known: dict[TopicPartition, int] = {}

    def get(self, tp: TopicPartition) -> int | None:
        return self.known.get(tp)

    async def refresh(self) -> None:
        hosted = self.ctx.replicas.partitions
        metadata = self.ctx.metadata
        leaders = {tp: state.leader for tp, state in metadata.partitions.items()}
        remote = [tp for tp in self._wanted() if tp not in hosted]
        known: dict[TopicPartition, int] = {}
        for leader, tps in by_leader(remote, leaders).items():
            broker = metadata.brokers.get(leader)
            if broker is None:
                continue
            try:
                answered = await asyncio.wait_for(
                    self._ask(broker.host, broker.port, tps), ASK_TIMEOUT_S
                )
            except (ReplogError, TimeoutError, OSError) as exc:
                logger.info("cannot ask broker %d for high watermarks: %s", leader, exc)
                continue
            known.update(answered)
        self.known = known

    async def _ask(
        self, host: str, port: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[ListOffsetsPartition]] = defaultdict(list)
        for tp in tps:
            by_topic[tp.topic].append(ListOffsetsPartition(tp.partition, LATEST_TIMESTAMP))
        request = ListOffsetsRequest([ListOffsetsTopic(t, ps) for t, ps in by_topic.items()])
        config = self.ctx.config
        connection = BrokerConnection(
            host,
            port,
            client_id=f"group-lag-{config.broker_id}",
            security=config.security.inter_broker(),
        )
        await connection.connect()
        try:
            response = await connection.send(request, timeout_s=ASK_TIMEOUT_S)
        finally:
            await connection.close()
        return {
            TopicPartition(topic.topic, answer.partition): answer.offset
            for topic in response.topics
            for answer in topic.partitions
            if not answer.error_code and answer.offset >= 0
        }
