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

Each batch is sent alone and retried through `leader_call` with the same sequence after
a retriable error (leader change, lost connection, timeout) until the delivery timeout:
the leader answers a retry of a batch it already has as a duplicate.
"""

from __future__ import annotations

import enum

import pyarrow as pa

from spark_replica.errors import (
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    TimeoutExpiredError,
)
from spark_replica.records import encode_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_ALL

from .cluster import Cluster
from .connection import BrokerConnection
from .in_flight import SEQUENCE_SPACE
from .leader_call import call_leader
from .produce_call import read_answer, send_produce
from .retry import RetryPolicy


class SendOutcome(enum.Enum):
    WRITTEN = "written"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out of order"
    FENCED = "fenced"


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
    ) -> None:
        self.cluster = cluster
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression = compression
        self.policy = policy or cluster.retry_policy

    async def send(
        self, tp: TopicPartition, records: pa.RecordBatch, base_sequence: int
    ) -> SendOutcome:
        """Write `records` to `tp` at `base_sequence` (taken modulo 2**31); the verdict.

        Raises DeliveryTimeoutError once retriable errors have lasted the delivery
        timeout, and any other error at once.
        """
        batch = encode_batch(
            records,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=base_sequence % SEQUENCE_SPACE,
            compression=self.compression,
        )

        async def produce(conn: BrokerConnection) -> None:
            response = await send_produce(conn, tp, batch, self.acks, self.request_timeout_ms)
            error, _ = read_answer(tp, response)
            if error is not None:
                raise error

        try:
            await call_leader(
                self.cluster,
                tp,
                produce,
                timeout_s=self.delivery_timeout_ms / 1000,
                purpose="produce",
                policy=self.policy,
            )
        except DuplicateSequenceNumberError:
            return SendOutcome.DUPLICATE
        except OutOfOrderSequenceError:
            return SendOutcome.OUT_OF_ORDER
        except InvalidProducerEpochError:
            return SendOutcome.FENCED
        except TimeoutExpiredError as exc:
            raise DeliveryTimeoutError(
                f"{tp}: batch at sequence {base_sequence} not acknowledged within "
                f"delivery.timeout.ms={self.delivery_timeout_ms}: {exc.__cause__}",
                exc.__cause__,
                maybe_stored=True,
            ) from exc.__cause__
        return SendOutcome.WRITTEN
