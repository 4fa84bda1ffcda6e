"""One replica of a topic-partition on this broker: its log, its role, its high watermark.

Concurrency: a Partition is owned by the broker's event loop; every method runs on that
loop and none blocks on the network, so no lock is needed. Disk writes happen inline
(page cache), as in Kafka's request threads.

The high watermark (HW) is the offset below which every record is on every in-sync
replica. The leader computes it as the minimum log end offset (LEO) over the ISR and
never moves it backwards. Consumers read only below it; producers with acks=all wait
for it to pass their batch.
"""

from __future__ import annotations

import asyncio
import logging

from brokerd.log import AppendInfo, Log
from spark_replica.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
)
from spark_replica.protocol.fetch import NO_LEADER_EPOCH
from spark_replica.protocol.produce import ACKS_ALL
from spark_replica.topics import TopicPartition

logger = logging.getLogger("brokerd.partition")


class Partition:
    def __init__(
        self, tp: TopicPartition, log: Log, local_broker_id: int, high_watermark: int = 0
    ) -> None:
        self.tp = tp
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id: int | None = None
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.min_insync_replicas = 1
        self.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        self._hw_advanced = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int]) -> None:
        """Take leadership at `leader_epoch`; the ISR is as the controller wrote it."""
        if self.is_leader and leader_epoch == self.leader_epoch:
            return
        logger.info("%s: leader at epoch %d, isr %s", self.tp, leader_epoch, isr)
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self._maybe_advance_high_watermark()

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: list[int]) -> None:
        logger.info("%s: follower of %d at epoch %d", self.tp, leader_id, leader_epoch)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = []

    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Fence a client whose idea of the leader epoch is older or newer than ours."""
        if requested_epoch == NO_LEADER_EPOCH:
            return
        if requested_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.tp}: leader epoch {requested_epoch} is older than {self.leader_epoch}"
            )
        if requested_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.tp}: leader epoch {requested_epoch} is newer than {self.leader_epoch}"
            )

    def require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp} "
                f"(leader: {self.leader_id})"
            )

    def append_as_leader(self, records: bytes | memoryview, acks: int, now_ms: int) -> AppendInfo:
        self.require_leader()
        if acks == ACKS_ALL and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.tp}: ISR {self.isr} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}"
            )
        info = self.log.append(
            records, assign_offsets=True, leader_epoch=self.leader_epoch, now_ms=now_ms
        )
        self._maybe_advance_high_watermark()
        return info

    def _maybe_advance_high_watermark(self) -> None:
        if not self.is_leader:
            return
        # Followers' log end offsets join this minimum once replication exists; with the
        # leader alone in the ISR the HW is its own LEO.
        candidate = self.log.log_end_offset
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self._hw_advanced.set()
            self._hw_advanced = asyncio.Event()

    def read(
        self, fetch_offset: int, max_bytes: int, *, current_leader_epoch: int, for_replica: bool
    ) -> bytes:
        """Batches from `fetch_offset`: below the HW for consumers, below the LEO for replicas."""
        self.require_leader()
        self.check_leader_epoch(current_leader_epoch)
        limit = self.log.log_end_offset if for_replica else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, max_offset=limit)

    def high_watermark_event(self) -> asyncio.Event:
        """An event set the next time the HW moves (a fresh one after each move)."""
        return self._hw_advanced

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> None:
        """Return once the HW is past `offset`; raise RequestTimedOutError at the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.high_watermark <= offset:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"{self.tp}: offset {offset} not replicated to the ISR within "
                    f"{timeout_s * 1000:.0f} ms (HW {self.high_watermark})"
                )
            try:
                await asyncio.wait_for(self._hw_advanced.wait(), remaining)
            except TimeoutError:
                continue
