"""ControlledShutdown: a broker about to stop asks the controller to move its leadership.

Request (to the controller): the broker's id and epoch. The controller moves every
partition that broker leads to another in-sync replica and takes it out of every ISR,
then answers with the partitions it still leads (those with no other replica in sync);
the broker retries a few times while that list is not empty, then stops anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import per_topic_partition_ids, wire_field
from spark_replica.wire.schema import Tabled, tabled


@tabled(wire_field("broker_id", "int32"), wire_field("broker_epoch", "int64"))
@dataclass(slots=True)
class ControlledShutdownRequest(Tabled):
    API_KEY = ApiKey.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int


@dataclass(slots=True)
class RemainingPartitions:
    topic: str
    partitions: list[int] = field(default_factory=list)


@tabled(per_topic_partition_ids("remaining", RemainingPartitions))
@dataclass(slots=True)
class ControlledShutdownResponse(Tabled):
    remaining: list[RemainingPartitions]
