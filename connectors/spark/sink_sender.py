"""Exactly-once sending of one streaming task's batches to one partition.

A streaming write task has a derived producer identity (sink_identity) and numbers each
partition's records from 0 in input order, so a record's sequence number is fixed by
its position. Every attempt at the task sends the same batches (sink_batching), and
the partition leader answers what it already has as a duplicate: DUPLICATE for one of
the producer's last five batches, DUPLICATE_SEQUENCE_NUMBER for older ones.

One case needs more: an attempt whose input was cut short (a failure upstream in the
same task ends Spark's input cleanly) wrote its last batch short, in power-of-two
pieces (aligned blocks). The replay's batch at that place is longer and overlaps them,
and the leader refuses it as out of order. `recover_batch` then tries the batch's own
aligned blocks, halving any that overlap: aligned blocks are nested or disjoint, so each
earlier piece is met exactly and answered as a duplicate (it is one of the last five
batches, or lies wholly before them), and the first block after the last written record
is appended (the leader appends only at exactly the next sequence, so nothing is ever
appended twice). Only a replay pays for these tries.

Another case is a replay fenced by the leader (INVALID_PRODUCER_EPOCH): a later
micro-batch of the same task has written the partition with a higher epoch, which
happens when the query's checkpoint was rolled back, or to a stale attempt still running
after its micro-batch finished. That micro-batch could only start once this one was
wholly written, so the fence is the answer "all of this is here already", and the
partition's remaining batches are skipped (`Outcome.SUPERSEDED`).

Batches go one at a time per partition through the client's SequencedProducer, which
sends at the sequence given, retries with the same sequence after a retriable error
until the delivery timeout, and answers the leader's verdict; the recovery above is
the only logic of this module.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable

import pyarrow as pa

from connectors.spark.sink_identity import ProducerIdentity
from spark_replica.client import SEQUENCE_SPACE, SendOutcome, SequencedProducer
from spark_replica.errors import OutOfOrderSequenceError
from spark_replica.topics import TopicPartition

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    WRITTEN = "written"
    ALREADY_WRITTEN = "already written"  # a duplicate: an earlier attempt wrote it
    OVERLAPS = "overlaps"  # out of order: part of it was written, as other batches
    # Fenced by a later epoch of the producer id: a later micro-batch of this task has
    # written the partition, so this micro-batch is wholly there (see PartitionSender).
    SUPERSEDED = "superseded"


OUTCOMES = {
    SendOutcome.WRITTEN: Outcome.WRITTEN,
    SendOutcome.DUPLICATE: Outcome.ALREADY_WRITTEN,
    SendOutcome.OUT_OF_ORDER: Outcome.OVERLAPS,
    SendOutcome.FENCED: Outcome.SUPERSEDED,
}


TryPiece = Callable[[int, int], Awaitable[Outcome]]


async def write_batch(count: int, try_piece: TryPiece) -> Outcome:
    """Write a batch of `count` records, whole or, if it overlaps earlier writes, in pieces.

    Returns what happened to the first try (WRITTEN, ALREADY_WRITTEN), OVERLAPS once the
    batch is written in pieces after an earlier attempt's, or SUPERSEDED (at any try),
    after which nothing more of this partition needs writing.
    """
    outcome = await try_piece(0, count)
    if outcome is not Outcome.OVERLAPS:
        return outcome
    return await recover_batch(count, try_piece)


def aligned_blocks(count: int) -> list[tuple[int, int]]:
    """(offset, size) blocks of `count` records, one per bit, largest first: 13 -> 8, 4, 1.

    Each block starts at a multiple of its size, so any two blocks cut this way (from any
    count, or by halving) are either nested or disjoint: that is what lets a replay find
    exactly the pieces an earlier attempt wrote.
    """
    blocks, offset = [], 0
    for bit in range(count.bit_length() - 1, -1, -1):
        if count & (1 << bit):
            blocks.append((offset, 1 << bit))
            offset += 1 << bit
    return blocks


async def recover_batch(count: int, try_piece: TryPiece) -> Outcome:
    """Write a batch of `count` records that overlapped earlier writes, piece by piece.

    `try_piece(offset, size)` sends records [offset, offset + size) of the batch with
    their own sequence numbers. The batch as a whole has already been tried. Aligned
    blocks are tried largest first and an overlapping block is halved, so every piece an
    earlier attempt wrote (aligned blocks too) is met exactly and answered as a duplicate.
    Returns OVERLAPS when done, SUPERSEDED as soon as a piece is.
    """
    blocks = aligned_blocks(count)
    if len(blocks) == 1:
        return await _split(0, count, try_piece)
    for offset, size in blocks:
        if await _write_block(offset, size, try_piece) is Outcome.SUPERSEDED:
            return Outcome.SUPERSEDED
    return Outcome.OVERLAPS


async def _write_block(offset: int, size: int, try_piece: TryPiece) -> Outcome:
    outcome = await try_piece(offset, size)
    return await _split(offset, size, try_piece) if outcome is Outcome.OVERLAPS else outcome


async def _split(offset: int, size: int, try_piece: TryPiece) -> Outcome:
    """Write both halves of an overlapping block: OVERLAPS, or SUPERSEDED if one was."""
    if size == 1:
        raise OutOfOrderSequenceError(
            f"record {offset} of a batch overlaps what an earlier attempt of this task "
            "wrote, in batches this attempt does not have: the task's input differs from "
            "the earlier attempt's (the exactly-once sink needs a replayable source and "
            "deterministic transformations), or this attempt's input was cut short by a "
            "failure upstream"
        )
    half = size // 2
    for start in (offset, offset + half):
        if await _write_block(start, half, try_piece) is Outcome.SUPERSEDED:
            return Outcome.SUPERSEDED
    return Outcome.OVERLAPS


class PartitionSender:
    """Sends one partition's batches in order, one at a time, numbering records from 0.

    Once the partition's leader fences this task's epoch (a later micro-batch of the
    same task has written the partition), the partition is done: micro-batches run one
    after another, each only after every task of the one before has had all its
    batches acknowledged, so everything this micro-batch writes here is there already
    (module docs of sink_identity). The rest of its batches are skipped, not sent.
    """

    def __init__(
        self, producer: SequencedProducer, tp: TopicPartition, identity: ProducerIdentity
    ) -> None:
        self.producer = producer
        self.tp = tp
        self.identity = identity
        self.next_sequence = 0
        self.superseded = False

    async def send(self, records: pa.RecordBatch) -> None:
        """Write the next batch of this partition's records exactly once."""
        if self.superseded:
            return
        first = self.next_sequence

        async def try_piece(offset: int, size: int) -> Outcome:
            piece = records.slice(offset, size)
            return OUTCOMES[await self.producer.send(self.tp, piece, first + offset)]

        outcome = await write_batch(records.num_rows, try_piece)
        if outcome is Outcome.OVERLAPS:
            log.info(
                "%s: the batch at sequence %d overlapped an earlier attempt's pieces; "
                "wrote the rest of it after them",
                self.tp,
                first,
            )
        elif outcome is Outcome.SUPERSEDED:
            self.superseded = True
            log.warning(
                "%s: a later micro-batch than %d of this task has written this partition, "
                "so all of micro-batch %d is there already (the query's checkpoint was "
                "rolled back, or this is a stale attempt): skipping its records from "
                "sequence %d on. After a rollback this is exact only if the micro-batch "
                "covers the input it covered when first written",
                self.tp,
                self.identity.micro_batch,
                self.identity.micro_batch,
                first,
            )
        self.next_sequence = (first + records.num_rows) % SEQUENCE_SPACE
