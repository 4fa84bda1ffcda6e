"""InitProducerId: get a producer id and epoch for an idempotent producer.

Request: transactional id (nullable string; replog has no transactions, so always
null), a timeout in ms, and the producer id and epoch the client already holds:
(-1, -1) for a new producer, or its current pair to have the epoch bumped, which fences
any older instance still writing with the previous epoch.

Response: the producer id (int64) and epoch (int16). Errors travel in the response
header, as for every request-level failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(slots=True)
class InitProducerIdRequest:
    API_KEY = ApiKey.INIT_PRODUCER_ID
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH

    def write(self, w: Writer) -> None:
        w.string(self.transactional_id)
        w.int32(self.transaction_timeout_ms)
        w.int64(self.producer_id)
        w.int16(self.producer_epoch)

    @classmethod
    def read(cls, r: Reader) -> InitProducerIdRequest:
        return cls(r.string(), r.int32(), r.int64(), r.int16())


@dataclass(slots=True)
class InitProducerIdResponse:
    producer_id: int
    producer_epoch: int

    def write(self, w: Writer) -> None:
        w.int64(self.producer_id)
        w.int16(self.producer_epoch)

    @classmethod
    def read(cls, r: Reader) -> InitProducerIdResponse:
        return cls(r.int64(), r.int16())
