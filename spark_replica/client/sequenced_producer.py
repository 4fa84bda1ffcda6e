"""Sending batches at sequence numbers the caller chooses, under a producer id it chose.

The ordinary Producer gets its identity from a broker and numbers its own batches. A
caller that must make a replay land on exactly the same sequence numbers (the Spark
sink's exactly-once streaming writes derive the identity from the query and the task,
and number records by their position in the task's input) stamps them itself and
needs the leader's verdict on each batch rather than an error:

* WRITTEN: appended now, or a duplicate of one of the producer's most recent batches,
  which the leader answers with the original offsets as if appended;
* DUPLICATE: an older duplicate (DUPLICATE_SEQUENCE_NUMBER): it is in the log already;
* OUT_OF_ORDER: not the next sequence (OUT_OF_ORDER_SEQUENCE_NUMBER): part of it was
  written before, as other batches;
* FENCED: a higher epoch of this producer id has written the partition
  (INVALID_PRODUCER_EPOCH).

With a `transactional_id` (the Spark sink's transactional mode) the batches carry the
transactional flag and go in Produce v1 with the id: the producer's records on a
partition then stay invisible to read_committed readers until the coordinator of the id
writes the producer's marker there.

Each batch goes through the Producer's own path for a partition (partition_sender.py
and its window, in_flight.py, in the mode where the caller chooses the sequences): the
same leader routing, metadata refreshes and retries, with the same sequence after a
retriable error until the delivery timeout. The leader answers a retry of a batch it
already has as a duplicate.
"""

from __future__ import annotations

import asyncio
import enum

import pyarrow as pa

from spark_replica.errors import (
    ConfigError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from spark_replica.records import TRANSACTIONAL_FLAG, encode_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_ALL

from .cluster import Cluster
from .in_flight import SEQUENCE_SPACE
from .partition_sender import PartitionSender, ProducerBatch
from .producer_config import ProducerConfig
from .retry import RetryPolicy


class SendOutcome(enum.Enum):
    WRITTEN = "written"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out of order"
    FENCED = "fenced"


class FixedIdentity:
    """The caller's producer id and epoch, for the partition senders (IdentitySource)."""

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.identity = (producer_id, producer_epoch)

    async def shared(self) -> tuple[int, int]:
        return self.identity

    async def replacement(self, current: tuple[int, int]) -> tuple[int, int]:
        raise ConfigError(f"producer {current}: a caller-numbered producer keeps its identity")


class SequencedProducer:
    """Sends batches with a fixed producer id and epoch, at caller-chosen sequences."""

    def __init__(
        self,
        cluster: Cluster,
        producer_id: int,
        producer_epoch: int,
        *,
        acks: int = ACKS_ALL,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        compression: str = "none",
        policy: RetryPolicy | None = None,
        transactional_id: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        policy = policy or cluster.retry_policy
        # One batch at a time per partition: each send awaits the leader's verdict.
        self.config = ProducerConfig(
            acks=acks,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=round(policy.backoff_s * 1000),
            retry_backoff_max_ms=round(policy.max_backoff_s * 1000),
            compression=compression,
            max_in_flight_per_partition=1,
            enable_idempotence=True,
            transactional_id=transactional_id,
        )
        self._attributes = TRANSACTIONAL_FLAG if transactional_id is not None else 0
        self._identity = FixedIdentity(producer_id, producer_epoch)
        self._connect_lock = asyncio.Lock()
        self._senders: dict[TopicPartition, PartitionSender] = {}

    async def send(
        self, tp: TopicPartition, records: pa.RecordBatch, base_sequence: int
    ) -> SendOutcome:
        """Write `records` to `tp` at `base_sequence` (taken modulo 2**31); the verdict.

        Raises DeliveryTimeoutError once retriable errors have lasted the delivery
        timeout, and any other error at once.
        """
        sequence = base_sequence % SEQUENCE_SPACE
        encoded = encode_batch(
            records,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=sequence,
            compression=self.config.compression,
            attributes=self._attributes,
        )
        loop = asyncio.get_running_loop()
        result: asyncio.Future[int] = loop.create_future()
        self._sender(tp).enqueue(
            ProducerBatch.numbered(
                tp,
                encoded,
                records.num_rows,
                self._identity.identity,
                sequence,
                loop.time(),
                result,
            )
        )
        try:
            await result
        except DuplicateSequenceNumberError:
            return SendOutcome.DUPLICATE
        except OutOfOrderSequenceError:
            return SendOutcome.OUT_OF_ORDER
        except InvalidProducerEpochError:
            return SendOutcome.FENCED
        return SendOutcome.WRITTEN

    def _sender(self, tp: TopicPartition) -> PartitionSender:
        sender = self._senders.get(tp)
        if sender is None:
            sender = self._senders[tp] = PartitionSender(
                tp,
                self.cluster,
                self.config,
                self._identity,
                self._connect_lock,
                lambda _batch: None,  # `send` awaits each batch itself
                caller_sequences=True,
            )
        return sender
