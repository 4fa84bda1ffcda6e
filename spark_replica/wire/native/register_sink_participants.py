"""RegisterSinkParticipants (replog's own, api key 1000): a Spark sink task's producers
joining its micro-batch's transaction before their first batch to each partition.

Kafka's transactions have one producer per transactional id; a micro-batch is written by
many tasks, each under its own derived producer id. So a task names, under the driver's
transactional id, producer id and epoch and the micro-batch id, the participants it is
about to write with: per topic, per partition, its producer id and epoch. The coordinator
then writes each participant's marker when the driver ends the transaction
(docs/design-notes.md, "A Spark sink's transactions").

Response: whether the micro-batch was committed before (`already_committed`: the task
writes nothing). Errors travel in the response header: PRODUCER_FENCED for a stale driver
epoch, INVALID_TXN_STATE for a zombie task, UNKNOWN_TOPIC_OR_PARTITION for a partition the
cluster does not have, and the coordinator errors a client retries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import per_topic, wire_field
from spark_replica.wire.schema import Tabled, tabled


@dataclass(slots=True)
class SinkParticipant:
    partition: int
    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class SinkParticipantTopic:
    topic: str
    partitions: list[SinkParticipant] = field(default_factory=list)


@tabled(
    wire_field("transactional_id", "string"),
    wire_field("producer_id", "int64"),
    wire_field("producer_epoch", "int16"),
    wire_field("micro_batch", "int64"),
    per_topic(
        "topics",
        SinkParticipantTopic,
        SinkParticipant,
        wire_field("partition", "int32"),
        wire_field("producer_id", "int64"),
        wire_field("producer_epoch", "int16"),
    ),
)
@dataclass(slots=True)
class RegisterSinkParticipantsRequest(Tabled):
    API_KEY = ApiKey.REGISTER_SINK_PARTICIPANTS
    transactional_id: str
    producer_id: int
    producer_epoch: int
    micro_batch: int
    topics: list[SinkParticipantTopic]


@tabled(wire_field("already_committed", "bool"))
@dataclass(slots=True)
class RegisterSinkParticipantsResponse(Tabled):
    already_committed: bool
