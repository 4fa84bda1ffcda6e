"""Requests to a coordinator (of a transactional id, or of a consumer group), found with
FindCoordinator and retried, the coordinator found again, on NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS
(every retriable error, per-partition ones included), until `max_block_ms` (Kafka's
bound on these calls) has passed.

The TransactionalProducer sends its transaction requests through it, and so does the
Spark sink's driver and tasks (InitProducerId, RegisterSinkParticipants, EndTxn), which
are not a producer of records under the transactional id.

Ownership: the coordinators found are kept per instance, which lives on one event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from spark_replica.errors import (
    BrokerResponseError,
    OperationNotAttemptedError,
    ReplogError,
    TimeoutExpiredError,
    error_for_code,
)
from spark_replica.wire.native.add_partitions_to_txn import TxnTopicResult
from spark_replica.wire.native.find_coordinator import FindCoordinatorRequest

from .cluster import Cluster
from .producer_config import ProducerConfig
from .retry import Attempts, is_retriable

# The connection purpose of coordinator requests, apart from the produce connections.
COORDINATOR_PURPOSE = "transactions"


class CoordinatorCalls:
    """Sends requests to the coordinator of a key, with the config's retry policy,
    request timeout and max_block_ms."""

    def __init__(self, cluster: Cluster, config: ProducerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self._coordinators: dict[tuple[int, str], int] = {}

    async def send(self, request: Any, key_type: int, key: str) -> Any:
        """Send `request` to the coordinator of `key` (of `key_type`) and return its
        answer; the first per-partition error of the answer is raised, typed."""
        coordinator_key = (key_type, key)
        loop = asyncio.get_running_loop()
        attempts = Attempts(self.config.retry_policy, loop.time() + self.config.max_block_ms / 1000)
        while True:
            try:
                node = await self._coordinator(coordinator_key)
                conn = await self.cluster.connection(node, COORDINATOR_PURPOSE)
                response = await conn.send(request, timeout_s=self.config.request_timeout_ms / 1000)
                _raise_partition_error(response)
                return response
            except ReplogError as exc:
                self._coordinators.pop(coordinator_key, None)
                delay = attempts.next_delay(exc, loop.time())
                if delay is None and not is_retriable(exc):
                    raise
                if delay is None:
                    raise TimeoutExpiredError(
                        f"{type(request).__name__} for {key!r}: no coordinator answered "
                        f"within max_block_ms={self.config.max_block_ms} ({exc})"
                    ) from exc
                await asyncio.sleep(delay)

    async def _coordinator(self, coordinator_key: tuple[int, str]) -> int:
        node = self._coordinators.get(coordinator_key)
        if node is None:
            key_type, key = coordinator_key
            found = await self.cluster.send_to_any(FindCoordinatorRequest(key, key_type))
            if found.node_id not in self.cluster.brokers:
                await self.cluster.refresh([])
            node = self._coordinators[coordinator_key] = found.node_id
        return node


def _raise_partition_error(response: Any) -> None:
    """The first per-partition error of an AddPartitionsToTxn or TxnOffsetCommit answer,
    raised typed; a partition only not attempted yields to the one that caused it."""
    topics: list[TxnTopicResult] = getattr(response, "topics", None) or []
    failed = [p for topic in topics for p in topic.partitions if p.error_code]
    if not failed:
        return
    failed.sort(key=lambda p: p.error_code == OperationNotAttemptedError.code)
    first = failed[0]
    error = error_for_code(first.error_code, first.error_message or "")
    assert isinstance(error, BrokerResponseError)
    raise error
