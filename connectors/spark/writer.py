"""The writers of `format("replog")`: `df.write` and `df.writeStream`.

Spark builds a writer on the driver (where the options and the input schema are
checked, so that mistakes fail before any task runs), pickles it to every task, and
calls `write()` there with the task's Arrow batches. A writer holds only plain,
already-checked values; connections are opened and the Arrow machinery imported inside
`write()`, so what Spark ships to executors stays small.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from connectors.spark.sink_options import (
    TRANSACTIONAL_OPTION,
    SinkOptions,
    check_batch_save_mode,
    parse_sink_options,
    sink_transactional_id,
)
from connectors.spark.sink_transaction import (
    SinkTransaction,
    begin_driver_epoch,
    end_micro_batch,
)
from spark_replica.errors import ConfigError, ReplogError

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplogCommitMessage(WriterCommitMessage):
    """What one task wrote: records per (topic, partition), and the identity it used.

    `producer_id` and `epoch` are -1 for a batch write, whose producer gets its id from
    a broker. `transaction` is the micro-batch's transaction in transactional mode: the
    driver's commit or abort reads it from here, since Spark commits through a writer
    it builds anew from the options, which never saw the driver's epoch.
    """

    task_partition: int
    records: dict[tuple[str, int], int] = field(default_factory=dict)
    producer_id: int = -1
    epoch: int = -1
    transaction: SinkTransaction | None = None


def open_transaction(messages: Sequence[WriterCommitMessage | None]) -> SinkTransaction | None:
    """The micro-batch's transaction if some task wrote into it; None if no task wrote
    (nothing to end) or the micro-batch was committed before (its tasks wrote nothing)."""
    for message in messages:
        if (
            isinstance(message, ReplogCommitMessage)
            and message.records
            and message.transaction is not None
        ):
            return message.transaction
    return None


def _total(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, int]:
    """(records, topic-partitions) over the tasks' commit messages."""
    records: Counter[tuple[str, int]] = Counter()
    for message in messages:
        if isinstance(message, ReplogCommitMessage):
            records.update(message.records)
    return sum(records.values()), len(records)


class ReplogBatchWriter(DataSourceArrowWriter):
    """`df.write.format("replog")`: appends the rows of a DataFrame to replog topics.

    Input columns as Spark's Kafka sink: `value` (binary or string) is required; `key`
    (binary or string), `topic` (string), `partition` (int) and `headers`
    (array<struct<key: string, value: binary>>) are optional. The `topic` option
    overrides the `topic` column; the `partition` column wins over hashing the key
    (Kafka's murmur2, so keys land where Kafka would put them); keyless records fill
    one partition with a batch's bytes, then the next (Kafka's sticky partitioning).

    Use `.mode("append")`. Spark accepts only append and overwrite for Python data
    sources (its default mode, errorIfExists, and ignore fail before reaching the
    sink), and a topic cannot be overwritten.

    Guarantee: each task writes through one idempotent producer (acks=all, the
    default), so retries inside a task never duplicate a record; a task that Spark
    retries writes its rows again (at least once), as Spark's Kafka sink does. For
    exactly-once, write with `writeStream`.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        check_batch_save_mode(overwrite)
        self.sink: SinkOptions = parse_sink_options(options, schema)
        if self.sink.transactional:
            raise ConfigError(
                f"{TRANSACTIONAL_OPTION}=true applies to writeStream (one transaction per "
                "micro-batch); df.write has no micro-batches to commit"
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ReplogCommitMessage:
        from pyspark import TaskContext

        from connectors.spark.writer_task import write_task

        context = TaskContext.get()
        task_partition = context.partitionId() if context is not None else 0
        written = write_task(iterator, self.sink, None, task_partition)
        return ReplogCommitMessage(task_partition, written)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        records, partitions = _total(messages)
        log.info("wrote %d records to %d topic-partitions", records, partitions)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        records, partitions = _total(messages)
        log.warning(
            "write failed; %d records already written to %d topic-partitions by tasks that "
            "finished stay there (a log cannot take records back)",
            records,
            partitions,
        )


class ReplogStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("replog")`: exactly-once appends from a streaming query.

    Same input columns, options and routing as the batch writer. Each task writes
    through an idempotent producer whose id and epoch are derived from the query id,
    the micro-batch id and the task's partition (see sink_identity), and cuts its
    batches at boundaries fixed by the records (see sink_batching). A retried task, a
    retried micro-batch or a query restarted from its checkpoint therefore resends the
    same batches with the same sequence numbers, and the partition leaders append only
    what they do not have yet: each input record is in the topic exactly once. A
    micro-batch replayed after a later one was written (the checkpoint was rolled back)
    is fenced by the later epoch where that one wrote, which means it is all there: the
    task skips those partitions (see sink_identity).

    Conditions (docs/spark-sink.md has the full list): acks=all (with 0 or 1 a stream
    write is at least once); a replayable source
    and deterministic transformations, so that a replayed micro-batch holds the same
    rows in the same tasks and order; the same checkpoint, sink options and topic
    partition counts across restarts; and retention that has not deleted the
    producer's last batches in a partition before a replay.

    Every output mode is accepted, as by Spark's Kafka sink; in complete mode each
    micro-batch appends the whole result table again.

    With `transactional=true` each micro-batch is one transaction under the query's
    transactional id (sink_transaction): read_committed readers see a micro-batch's
    records on a partition all at once, when the driver's commit ends it, or never.
    Spark builds this writer on the driver for every micro-batch twice: once to ship to
    the tasks (pickled), once to commit or abort (never pickled, in another process).
    Only the first may begin a driver epoch, since InitProducerId aborts the open
    transaction: so the epoch is begun when the writer is first pickled, once per
    writer, and the commit finds it in the tasks' commit messages. Were Spark to build
    the writer once per query run instead, the one epoch would serve every micro-batch,
    which the coordinator allows.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.sink: SinkOptions = parse_sink_options(options, schema)
        self.transactional_id = sink_transactional_id(options) if self.sink.transactional else None
        self.transaction: SinkTransaction | None = None

    def __getstate__(self) -> dict[str, object]:
        """Begin the driver epoch before the writer goes to the tasks (see the class)."""
        if self.transactional_id is not None and self.transaction is None:
            self.transaction = begin_driver_epoch(self.sink, self.transactional_id)
            log.info(
                "transactional id %s: driver epoch %s",
                self.transactional_id,
                self.transaction.driver,
            )
        return dict(self.__dict__)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ReplogCommitMessage:
        from pyspark import TaskContext

        from connectors.spark.sink_identity import (
            BATCH_ID_PROPERTY,
            QUERY_ID_PROPERTY,
            identity_from_properties,
        )
        from connectors.spark.writer_task import write_task

        context = TaskContext.get()
        task_partition = context.partitionId() if context is not None else 0
        transaction = self.transaction
        identity = identity_from_properties(
            context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None,
            context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None,
            task_partition,
            transaction.driver if transaction is not None else None,
        )
        written = write_task(iterator, self.sink, identity, task_partition, transaction)
        return ReplogCommitMessage(
            task_partition, written, identity.producer_id, identity.epoch, transaction
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        transaction = open_transaction(messages)
        if transaction is not None:
            end_micro_batch(self.sink, transaction, commit=True)
        records, partitions = _total(messages)
        log.info(
            "micro-batch %d: wrote %d records to %d topic-partitions",
            batchId,
            records,
            partitions,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        transaction = open_transaction(messages)
        if transaction is not None:
            try:
                end_micro_batch(self.sink, transaction, commit=False)
            except ReplogError as exc:
                log.warning(
                    "micro-batch %d: its transaction could not be aborted (%s); the next "
                    "driver epoch of %s aborts it",
                    batchId,
                    exc,
                    transaction.transactional_id,
                )
        records, partitions = _total(messages)
        log.warning(
            "micro-batch %d aborted; its finished tasks wrote %d records to %d "
            "topic-partitions, and failed tasks may have written part of theirs: a rerun "
            "from the checkpoint writes the rest without duplicating any of them",
            batchId,
            records,
            partitions,
        )
