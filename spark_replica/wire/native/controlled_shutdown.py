"""ControlledShutdown: a broker about to stop asks the controller to move its leadership.

Request (to the controller): the broker's id and epoch. The controller moves every
partition that broker leads to another in-sync replica and takes it out of every ISR,
then answers with the partitions it still leads (those with no other replica in sync);
the broker retries a few times while that list is not empty, then stops anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer


@dataclass(slots=True)
class ControlledShutdownRequest:
    API_KEY = ApiKey.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int

    def write(self, w: Writer) -> None:
        w.int32(self.broker_id)
        w.int64(self.broker_epoch)

    @classmethod
    def read(cls, r: Reader) -> ControlledShutdownRequest:
        return cls(r.int32(), r.int64())


@dataclass(slots=True)
class RemainingPartitions:
    topic: str
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ControlledShutdownResponse:
    remaining: list[RemainingPartitions]

    def write(self, w: Writer) -> None:
        w.topics(self.remaining, w.int32)

    @classmethod
    def read(cls, r: Reader) -> ControlledShutdownResponse:
        return cls(r.topics(RemainingPartitions, r.int32))
