"""The coordinator requests of a transaction written by many producers: a Spark sink's
micro-batch (docs/design-notes.md, "A Spark sink's transactions"). The driver holds the
transactional id (InitProducerId, then EndTxn for each micro-batch); each task registers
its derived producer on the partitions it writes to (RegisterSinkParticipants, replog's
own API) before its first batch there.

These are requests and their answers only: when to send them, and what the sink does
with `already committed`, is the connector's (connectors/spark/sink_transaction.py).
Every request goes through CoordinatorCalls, retried on the coordinator's retriable
errors until `max_block_ms`; a stale driver epoch (PRODUCER_FENCED) and a zombie task's
micro-batch (INVALID_TXN_STATE) are raised, typed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_replica.topics import TopicPartition
from spark_replica.wire.native.end_txn import EndTxnRequest
from spark_replica.wire.native.find_coordinator import TRANSACTION_KEY_TYPE
from spark_replica.wire.native.init_producer_id import InitProducerIdRequest
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    SinkParticipant,
    SinkParticipantTopic,
)

from .cluster import Cluster
from .coordinator_calls import CoordinatorCalls
from .producer_config import ProducerConfig


@dataclass(frozen=True, slots=True)
class Participant:
    """One producer writing to one partition inside the transaction."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int


class SinkTransactionCalls:
    """The requests of `config.transactional_id`'s many-producer transactions, on one
    event loop and cluster."""

    def __init__(self, cluster: Cluster, config: ProducerConfig) -> None:
        if not config.transactional_id:
            raise ValueError("a many-producer transaction needs a transactional id")
        self.transactional_id = config.transactional_id
        self.config = config
        self._calls = CoordinatorCalls(cluster, config)

    async def begin_driver_epoch(self) -> tuple[int, int]:
        """InitProducerId: the driver's (producer id, epoch). The new epoch fences the
        tasks of every earlier one and aborts the transaction left open."""
        request = InitProducerIdRequest(self.transactional_id, self.config.transaction_timeout_ms)
        answer = await self._send(request)
        return answer.producer_id, answer.producer_epoch

    async def end(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """EndTxn: commit or abort the open transaction; the coordinator writes every
        participant's marker. A repeat of an EndTxn that completed is answered OK."""
        request = EndTxnRequest(self.transactional_id, producer_id, producer_epoch, commit)
        await self._send(request)

    async def register(
        self,
        producer_id: int,
        producer_epoch: int,
        micro_batch: int,
        participants: Iterable[Participant],
    ) -> bool:
        """Join micro-batch `micro_batch`'s transaction (of the driver's producer id and
        epoch); True if that micro-batch committed before, and nothing is to be written."""
        by_topic: dict[str, list[SinkParticipant]] = {}
        for participant in participants:
            by_topic.setdefault(participant.tp.topic, []).append(
                SinkParticipant(
                    participant.tp.partition, participant.producer_id, participant.producer_epoch
                )
            )
        request = RegisterSinkParticipantsRequest(
            self.transactional_id,
            producer_id,
            producer_epoch,
            micro_batch,
            [SinkParticipantTopic(topic, joining) for topic, joining in by_topic.items()],
        )
        answer = await self._send(request)
        return bool(answer.already_committed)

    async def _send(self, request: Any) -> Any:
        return await self._calls.send(request, TRANSACTION_KEY_TYPE, self.transactional_id)
