"""InitProducerId: get a producer id and epoch for an idempotent producer.

Request: transactional id (nullable string), the transaction timeout in ms, and the
producer id and epoch the client already holds: (-1, -1) for a new producer, or its
current pair to have the epoch bumped, which fences any older instance still writing with
the previous epoch.

Version 1 (transactions) has version 0's layout: a broker serving it answers a
transactional id, which brokers serving only version 0 refuse, so a client sends one only
at version 1. The id's transaction coordinator answers (NOT_COORDINATOR from any other
broker), bumping the id's epoch, which fences its previous producer and aborts that
producer's open transaction.

Response: the producer id (int64) and epoch (int16). Errors travel in the response
header, as for every request-level failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import wire_field
from spark_replica.wire.schema import Tabled, tabled

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# The version a transactional id may be sent at.
TRANSACTIONS_VERSION = 1


@tabled(
    wire_field("transactional_id", "string", nullable=True),
    wire_field("transaction_timeout_ms", "int32"),
    wire_field("producer_id", "int64"),
    wire_field("producer_epoch", "int16"),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class InitProducerIdRequest(Tabled):
    API_KEY = ApiKey.INIT_PRODUCER_ID
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH

    def lowest_version(self) -> int:
        """A transactional id needs version 1, whose broker has a coordinator for it."""
        return 0 if self.transactional_id is None else TRANSACTIONS_VERSION


@tabled(
    wire_field("producer_id", "int64"),
    wire_field("producer_epoch", "int16"),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class InitProducerIdResponse(Tabled):
    producer_id: int
    producer_epoch: int
