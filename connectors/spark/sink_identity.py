"""The idempotent-producer identity of one streaming write task, derived, never allocated.

Exactly-once streaming writes rest on one fact: every attempt at writing the same
(query, micro-batch, task partition) uses the same producer id and epoch and numbers
its records the same way, so the partition leaders recognise a replay and append only
what they do not have yet. Allocating ids (InitProducerId) cannot give that, because a
retried task or a restarted query would get a new id; deriving the id from what Spark
keeps stable across retries and restarts can:

- the query id (`sql.streaming.queryId`), stored in the checkpoint,
- the micro-batch id (`streaming.sql.batchId`), replayed from the checkpoint's offset log,
- the task's partition id, fixed by the batch's plan.

producer id = 2**62 + a 62-bit hash of (query id, task partition, batch id // 32768),
epoch = batch id % 32768. Epochs are int16, so each block of 32768 micro-batches moves
to a fresh producer id. Ids allocated by brokers count up from 0, so the top half of the
id space (>= 2**62, DERIVED_PRODUCER_ID_BASE) never meets them.

In transactional mode (`transactional=true`) the identity follows the driver's producer
id and epoch instead (`DriverEpoch`, from InitProducerId on the driver, bumped for every
micro-batch): producer id = 2**62 + a 62-bit hash of (query id, task partition, driver
producer id), epoch = the driver's epoch. A micro-batch whose transaction was aborted (its
driver died, or its tasks failed) runs again under a new driver epoch, so its tasks write
as a new epoch of their producers: under the aborted identity their batches would be
answered as duplicates of aborted records, or fenced once its abort marker is in
(docs/design-notes.md, "A Spark sink's transactions"). Retries of a task within one
driver epoch keep one identity, answered as duplicates inside the open transaction as
without transactions. A partition keeps one producer per task partition, as without
transactions, not one per micro-batch; when the driver's epochs run out, the coordinator
gives it a new producer id, and the tasks' ids move with it.

Within a block, a later micro-batch writes with a higher epoch, and a partition leader
keeps only a producer's latest epoch: an older one is fenced (INVALID_PRODUCER_EPOCH).
Spark runs micro-batches one after another, the next only after every task of the one
before has returned, and a task returns only once its batches are acknowledged. So a
fence on this identity means: this task's whole output of this micro-batch is already
in that partition. It is met by a stale attempt still running after its micro-batch
finished, and by every replay after the checkpoint was rolled back (its offsets/ and
commits/ entries deleted, or an older copy put back); the sender takes it as "already
written" and skips the rest of that partition (sink_sender).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from spark_replica.errors import ConfigError
from spark_replica.records import DERIVED_PRODUCER_ID_BASE

EPOCHS_PER_PRODUCER_ID = 32768  # producer epochs are int16: 0..32767
_HASH_MASK = 2**62 - 1

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class ProducerIdentity:
    producer_id: int
    epoch: int
    micro_batch: int  # the batch id it was derived from; routing uses it too


@dataclass(frozen=True, slots=True)
class DriverEpoch:
    """The driver's producer id and epoch for its transactional id (transactional mode)."""

    producer_id: int
    epoch: int


def stream_task_identity(
    query_id: str, task_partition: int, batch_id: int, driver: DriverEpoch | None = None
) -> ProducerIdentity:
    """The identity every attempt of this task uses, in this run or after a restart (in
    transactional mode: under this driver epoch)."""
    if not query_id:
        raise ConfigError("a streaming write needs the query id of the task's query")
    if task_partition < 0 or batch_id < 0:
        raise ConfigError(
            f"task partition ({task_partition}) and batch id ({batch_id}) must be 0 or more"
        )
    if driver is None:
        block, epoch = divmod(batch_id, EPOCHS_PER_PRODUCER_ID)
        seed = f"{query_id}\x00{task_partition}\x00{block}"
    else:
        epoch = driver.epoch
        seed = f"{query_id}\x00{task_partition}\x00driver\x00{driver.producer_id}"
    digest = hashlib.blake2b(
        seed.encode(),
        digest_size=8,
        person=b"replog-sink",
    ).digest()
    producer_id = DERIVED_PRODUCER_ID_BASE + (int.from_bytes(digest, "big") & _HASH_MASK)
    return ProducerIdentity(producer_id, epoch, batch_id)


def identity_from_properties(
    query_id: str | None,
    batch_id: str | None,
    task_partition: int,
    driver: DriverEpoch | None = None,
) -> ProducerIdentity:
    """The identity from a task context's local properties; fail clearly if they are gone."""
    if not query_id or batch_id is None:
        raise ConfigError(
            f"the task has no {QUERY_ID_PROPERTY}/{BATCH_ID_PROPERTY} property: the replog "
            "stream writer runs only inside a Spark structured streaming query"
        )
    try:
        batch = int(batch_id)
    except ValueError:
        raise ConfigError(f"{BATCH_ID_PROPERTY}={batch_id!r} is not a micro-batch id") from None
    return stream_task_identity(query_id, task_partition, batch, driver)
