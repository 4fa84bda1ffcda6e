"""Sending one partition's batches: the I/O around its PartitionWindow (in_flight.py).

Ownership: a PartitionSender belongs to one Producer and runs on its event loop; its
open batch (taking records, accumulator.py), its queue (sealed batches not yet sent)
and its window (batches sent and not finished) are touched only there. One task per
partition runs while it has work and ends when idle. The open batch is sealed when
full, or once it has lingered `linger_ms` while the window has room for it: while the
window is full it keeps filling, so batches grow with the load (as Kafka's do).

Order on the wire: the leader serves one connection's requests in order, so a
partition's requests must be written in the order the window starts or resends them.
The task takes the connection first and then creates the request's task; tasks start
in creation order, and the first step of BrokerConnection.send writes the whole frame
before anything can suspend it. The connection is shared by every partition led by the
same broker (Cluster caches it per broker and purpose); the lock around obtaining it
keeps two partitions from opening two connections at once.

Leader changes: a stale-leader error (NOT_LEADER, a lost or refused connection) makes
the partition refresh its metadata, and the first retry goes at once. When the leader
crashed, the controller has not elected another yet, so that retry is refused too and
waits its backoff; meanwhile the partition asks for metadata again after
LEADER_POLL_S, then twice as long each time, and sends the retry as soon as a new
leader shows (in_flight.py's on_leader). A retry that waited its whole backoff is sent
with metadata asked for after it became due, never with the answer from the moment of
the error. Refreshes are shared (Cluster.refresh_if_older): the partitions of a topic
that all lost their leader at once ask once, not once each.

Delivery timeout: a batch is retried until `delivery_timeout_ms` after it was sealed,
and no attempt asks the broker to wait past that; then its records fail with a
DeliveryTimeoutError that names the last cause (delivery_timeout.py).

Idempotence: the partition's batches are stamped with the producer identity and their
window sequence. When the window says the leader's numbering is not ours (after a
batch whose fate is unknown), this partition alone bumps its epoch through
InitProducerId, once nothing is in flight, and the window numbers its held batches
from 0 again. The leader's producer state is per partition, so other partitions keep
the epoch they have; and the new epoch fences any old copy still on its way once a
batch of the new one has landed. A SequencedProducer's partitions (`caller_sequences`)
send batches its caller numbered under an identity it chose, and never take another:
the leader's sequence verdicts are the answers of those batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from spark_replica.errors import (
    ConnectionLostError,
    DuplicateSequenceNumberError,
    ReplogError,
)
from spark_replica.records import (
    HEADER_TYPE,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    encode_batch,
    stamp_producer,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.init_producer_id import NO_PRODUCER_EPOCH
from spark_replica.wire.native.produce import ACKS_NONE

from .accumulator import Callback, Headers, OpenBatch
from .cluster import Cluster
from .connection import BrokerConnection
from .delivery_timeout import delivery_timeout_error
from .in_flight import Failure, PartitionWindow, WindowBatch
from .produce_call import read_answer, send_produce
from .producer_config import ProducerConfig
from .retry import refreshes_metadata

logger = logging.getLogger("spark_replica.client.producer")

# After a stale-leader error, the first metadata poll for a new leader; it doubles up
# to the retry policy's maximum backoff. A crashed leader is replaced within about
# 100 ms (the brokers notice refused connections), so the first polls catch it.
LEADER_POLL_S = 0.025


@dataclass(eq=False)
class ProducerBatch:
    """A sealed batch: records still to encode, or a batch encoded by the caller.

    Records still to encode are the accumulator's columns or the caller's Arrow batch;
    either is encoded when first sent, once the identity and sequence are known.
    `result` gets the base offset the leader assigned (-1 when it is not known: acks=0,
    or a duplicate of a batch appended long ago), or the error that ended it.
    `records` is dropped once encoded; the delivery callbacks stay until the answer.
    """

    tp: TopicPartition
    record_count: int
    created_at: float
    result: asyncio.Future[int]
    records: OpenBatch | pa.RecordBatch | None = None
    callbacks: list[tuple[int, Callback]] | None = None
    memory_bytes: int = 0  # what the records reserved in the producer's buffer pool
    encoded: bytes | memoryview | None = None  # memoryview: read-only, see Producer.send_batch
    base_sequence: int = NO_SEQUENCE  # chosen by the caller (SequencedProducer), or none
    _stamped: tuple[tuple[int, int, int], memoryview] | None = field(default=None, repr=False)

    @classmethod
    def numbered(
        cls,
        tp: TopicPartition,
        encoded: memoryview,
        record_count: int,
        identity: tuple[int, int],
        base_sequence: int,
        created_at: float,
        result: asyncio.Future[int],
    ) -> ProducerBatch:
        """A batch the caller encoded with its own identity and sequence: sent as is."""
        batch = cls(
            tp, record_count, created_at, result, encoded=encoded, base_sequence=base_sequence
        )
        batch._stamped = ((*identity, base_sequence), encoded)
        return batch

    def encode(
        self,
        compression: str,
        producer_id: int = NO_PRODUCER_ID,
        epoch: int = NO_PRODUCER_EPOCH,
        sequence: int = NO_SEQUENCE,
        attributes: int = 0,
    ) -> None:
        """Encode the records once, stamped with this identity and sequence if given
        (and with `attributes`: a transactional producer's flag).

        Stamping while encoding spares the copy (and second CRC pass) that stamping an
        encoded batch costs; `stamped` copies only if the numbers change later.
        """
        if self.encoded is not None or self.records is None:
            return
        if isinstance(self.records, pa.RecordBatch):
            encoded = encode_batch(
                self.records,
                compression=compression,
                attributes=attributes,
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=sequence,
            )
        else:
            encoded = encode_columns(
                self.records, compression, producer_id, epoch, sequence, attributes
            )
        self.encoded = encoded
        self.records = None
        if producer_id != NO_PRODUCER_ID:
            self._stamped = ((producer_id, epoch, sequence), encoded)

    def stamped(self, producer_id: int, epoch: int, sequence: int) -> memoryview:
        """The encoded batch carrying this identity and sequence (copied once per change)."""
        assert self.encoded is not None
        key = (producer_id, epoch, sequence)
        if self._stamped is None or self._stamped[0] != key:
            self._stamped = (key, stamp_producer(self.encoded, producer_id, epoch, sequence))
        return self._stamped[1]


def encode_columns(
    records: OpenBatch,
    compression: str,
    producer_id: int,
    epoch: int,
    sequence: int,
    attributes: int = 0,
) -> memoryview:
    """One batch of an open batch's columns; the values and keys are bytes or None."""
    arrays = [
        pa.array(records.values, pa.binary()),
        pa.array(records.keys, pa.binary()),
        pa.array(records.timestamps, pa.int64()),
    ]
    names = ["value", "key", "timestamp"]
    if records.headers is not None:
        arrays.append(
            pa.array(
                [
                    None if h is None else [{"key": k, "value": v} for k, v in h]
                    for h in records.headers
                ],
                HEADER_TYPE,
            )
        )
        names.append("headers")
    return encode_batch(
        pa.RecordBatch.from_arrays(arrays, names=names),
        compression=compression,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


class IdentitySource(Protocol):
    async def shared(self) -> tuple[int, int]:
        """The producer's (producer id, epoch), asking a broker once if need be."""
        ...

    async def replacement(self, current: tuple[int, int]) -> tuple[int, int]:
        """`current` with its epoch bumped, for one partition."""
        ...


class PartitionSender:
    def __init__(
        self,
        tp: TopicPartition,
        cluster: Cluster,
        config: ProducerConfig,
        identities: IdentitySource,
        connect_lock: asyncio.Lock,
        track: Callable[[ProducerBatch], None],
        *,
        caller_sequences: bool = False,
    ) -> None:
        self.tp = tp
        self.cluster = cluster
        self.config = config
        # Batches come numbered (ProducerBatch.numbered), and the leader's sequence
        # verdicts, a duplicate included, are their answers (in_flight.py).
        self.caller_sequences = caller_sequences
        self.window: PartitionWindow[ProducerBatch] = PartitionWindow(
            idempotent=config.idempotent,
            max_in_flight=config.max_in_flight_per_partition,
            policy=config.retry_policy,
            caller_sequences=caller_sequences,
        )
        self.queue: deque[ProducerBatch] = deque()
        self.open: OpenBatch | None = None  # taking records; not in `queue` yet
        self.identity: tuple[int, int] | None = None
        self._identities = identities
        self._connect_lock = connect_lock
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Future[Any]] = set()
        # Loop time of a stale-leader error not yet followed by a metadata refresh.
        self._refresh_since: float | None = None
        self._poll_delay_s = LEADER_POLL_S
        self._next_poll_at = 0.0
        self._delivery_timeout_s = config.delivery_timeout_ms / 1000
        self._last_error: BaseException | None = None  # since the last success
        # The connection the last request went on, and when it was taken.
        self._connection: BrokerConnection | None = None
        self._connection_taken_at = 0.0
        self._track = track
        self._linger_s = config.linger_ms / 1000
        self._batch_bytes = config.batch_size
        self._batch_records = config.batch_records

    def append(
        self,
        value: bytes | None,
        key: bytes | None,
        timestamp_ms: int,
        headers: Headers | None,
        size_bytes: int,
        callback: Callback | None,
    ) -> None:
        """Add one record to the open batch (the per-record hot path: no I/O, no objects)."""
        batch = self.open
        if batch is None or not batch.add(
            value, key, timestamp_ms, headers, size_bytes, callback, self._batch_bytes
        ):
            self.seal_open()
            batch = self.open = OpenBatch(asyncio.get_running_loop().time())
            batch.add(value, key, timestamp_ms, headers, size_bytes, callback, self._batch_bytes)
            self._wake_up()
        if batch.is_full(self._batch_bytes, self._batch_records):
            self.seal_open()

    def seal_open(self) -> None:
        """Close the open batch (full, lingered, flushed) and queue it to be sent."""
        records, self.open = self.open, None
        if records is None or not records.values:
            return
        result: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        batch = ProducerBatch(
            self.tp,
            len(records.values),
            records.opened_at,
            result,
            records=records,
            callbacks=records.callbacks or None,
            memory_bytes=records.size_bytes,
        )
        self._track(batch)
        self.enqueue(batch)

    def enqueue(self, batch: ProducerBatch) -> None:
        """Queue a sealed batch behind the partition's others and make sure it goes."""
        if self.window.fatal is not None:
            _fail(batch, self.window.fatal)
            return
        self.queue.append(batch)
        self._wake_up()

    def _wake_up(self) -> None:
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"replog-produce-{self.tp}")

    async def _run(self) -> None:
        try:
            while self.queue or self.window.batches or self.open is not None:
                self._wake.clear()
                if not await self._step():
                    await self._sleep()
        except Exception as exc:  # a bug here must not leave callers waiting forever
            logger.exception("%s: sender failed", self.tp)
            self._fail_everything(exc)
        finally:
            self._task = None

    async def _step(self) -> bool:
        """Do the next thing the partition needs; False if it must wait for an answer."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.open is not None and (
            self.window.fatal is not None or self.open.opened_at + self._delivery_timeout_s <= now
        ):
            self.seal_open()
        self._expire_queued(now)
        if self.window.fatal is not None:
            self._fail_queued(self.window.fatal)
            return False
        if self.window.needs_new_identity:
            if self.window.in_flight():
                return False
            await self._take_new_identity()
            return True
        if self._refresh_since is not None:
            since, self._refresh_since = self._refresh_since, None
            await self._refresh(since)
            return True
        if self.window.awaits_leader(now) and now >= self._next_poll_at:
            await self._poll_leader()
            return True
        retry = self.window.due_retry(loop.time())
        if retry is not None:
            if refreshes_metadata(retry.last_error):
                # Not the metadata of the error's moment if the retry waited since.
                await self._refresh(retry.retry_at)
            self.window.resend(retry)
            await self._send(retry)
            return True
        if not self.window.can_start():
            return False
        if not self.queue and self.open is not None and self.open.lingered(self._linger_s, now):
            self.seal_open()
        if self.queue:
            return await self._start_next()
        return False

    async def _refresh(self, since: float) -> None:
        """Refresh the topic's metadata unless a refresh started at `since` or later."""
        with contextlib.suppress(ReplogError):
            await self.cluster.refresh_if_older([self.tp.topic], since)

    async def _poll_leader(self) -> None:
        """Ask for the partition's leader while a retry waits; retry now if it changed."""
        asked = asyncio.get_running_loop().time()
        self._next_poll_at = asked + self._poll_delay_s
        self._poll_delay_s = min(self._poll_delay_s * 2, self.config.retry_policy.max_backoff_s)
        await self._refresh(asked)
        try:
            partition = self.cluster.partition(self.tp)
        except ReplogError:
            return
        # Due as of `asked`: the metadata the retry goes with was asked for then.
        self.window.on_leader((partition.leader, partition.leader_epoch), asked)

    async def _start_next(self) -> bool:
        batch = self.queue[0]
        if self.config.idempotent and self.identity is None:
            # Waiting for an identity counts against the batch's delivery timeout, as
            # Kafka's accumulator expires batches whatever holds them up.
            left_s = batch.created_at + self._delivery_timeout_s - asyncio.get_running_loop().time()
            try:
                self.identity = await asyncio.wait_for(self._identities.shared(), max(left_s, 0))
            except TimeoutError:
                return True
            except ReplogError:
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                return True
            if not self.queue or self.queue[0] is not batch or not self.window.can_start():
                return True
        try:
            if self.identity is not None and self.config.idempotent:
                batch.encode(
                    self.config.compression,
                    *self.identity,
                    self.window.next_sequence,
                    TRANSACTIONAL_FLAG if self.config.transactional_id is not None else 0,
                )
            else:
                batch.encode(self.config.compression)
        except (ValueError, TypeError, pa.ArrowException, ReplogError) as exc:
            self.queue.popleft()
            _fail(batch, exc)
            return True
        self.queue.popleft()
        entry = WindowBatch(
            batch,
            batch.record_count,
            batch.created_at + self._delivery_timeout_s,
            batch.base_sequence,
        )
        self.window.start(entry)
        await self._send(entry)
        return True

    async def _sleep(self) -> None:
        wake_at = self.window.next_retry_at()
        if self.open is not None and not self.queue and self.window.can_start():
            lingered_at = self.open.opened_at + self._linger_s
            wake_at = lingered_at if wake_at is None else min(wake_at, lingered_at)
        if self.window.awaits_leader(asyncio.get_running_loop().time()):
            wake_at = self._next_poll_at if wake_at is None else min(wake_at, self._next_poll_at)
        if wake_at is None:
            await self._wake.wait()
            return
        delay = wake_at - asyncio.get_running_loop().time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(delay, 0))

    async def _send(self, entry: WindowBatch[ProducerBatch]) -> None:
        """Write one attempt of `entry`; its answer is handled by `_on_answer`."""
        batch = entry.payload
        assert batch.encoded is not None
        data: bytes | memoryview = batch.encoded
        if self.config.idempotent:
            assert self.identity is not None
            data = batch.stamped(*self.identity, entry.base_sequence)
        try:
            conn = await self._leader_connection(entry)
        except ReplogError as exc:
            self._on_error(entry, exc, sent=False)
            return
        sending = send_produce(
            conn,
            self.tp,
            data,
            self.config.acks,
            self._attempt_timeout_ms(entry),
            self.config.transactional_id,
        )
        task = asyncio.ensure_future(sending)
        self._requests.add(task)
        task.add_done_callback(functools.partial(self._on_answer, entry))

    def _attempt_timeout_ms(self, entry: WindowBatch[ProducerBatch]) -> int:
        """The request timeout, cut to what is left of the batch's delivery timeout."""
        left_ms = (entry.deadline - asyncio.get_running_loop().time()) * 1000
        return max(1, min(self.config.request_timeout_ms, int(left_ms)))

    async def _leader_connection(self, entry: WindowBatch[ProducerBatch]) -> Any:
        previous = self._connection
        if previous is not None and not previous.is_usable:
            # As Kafka's clients: a dropped connection means the metadata may be stale.
            # It is how a broker tells an acks=0 producer (which reads no answers) that
            # it no longer leads the partition.
            await self._refresh(self._connection_taken_at)
        await self.cluster.ensure_topic(self.tp.topic)
        leader = self.cluster.leader_for(self.tp)
        entry.leader = (leader, self.cluster.partition(self.tp).leader_epoch)
        async with self._connect_lock:
            self._connection = await self.cluster.connection(leader, "produce")
        self._connection_taken_at = asyncio.get_running_loop().time()
        return self._connection

    def _on_answer(self, entry: WindowBatch[ProducerBatch], task: asyncio.Future[Any]) -> None:
        self._requests.discard(task)
        if entry not in self.window.batches:
            return  # already failed with everything else by _fail_everything
        if task.cancelled():
            self._on_error(entry, ConnectionLostError(f"{self.tp}: produce request cancelled"))
            return
        error = task.exception()
        offset = -1
        if error is None and self.config.acks != ACKS_NONE:
            error, offset = read_answer(self.tp, task.result())
        if isinstance(error, DuplicateSequenceNumberError) and not self.caller_sequences:
            error, offset = None, -1
        if error is not None:
            self._on_error(entry, error)
            return
        self.window.on_success(entry)
        self._last_error = None
        if not entry.payload.result.done():
            entry.payload.result.set_result(offset)
        self._wake.set()

    def _on_error(
        self, entry: WindowBatch[ProducerBatch], error: BaseException, *, sent: bool = True
    ) -> None:
        now = asyncio.get_running_loop().time()
        if refreshes_metadata(error):
            self._refresh_since = now
            self._poll_delay_s = LEADER_POLL_S
            self._next_poll_at = now + LEADER_POLL_S
        self._last_error = error
        self._report(self.window.on_error(entry, error, now, sent=sent))
        self._wake.set()

    def _report(self, failures: list[Failure[ProducerBatch]]) -> None:
        for failure in failures:
            reported = failure.error
            if failure.expired:
                reported = delivery_timeout_error(
                    self.tp,
                    failure.batch.record_count,
                    self.config.delivery_timeout_ms,
                    failure.error,
                    maybe_stored=failure.batch.maybe_appended,
                )
            _fail(failure.batch.payload, reported)

    async def _take_new_identity(self) -> None:
        assert self.identity is not None
        try:
            fresh = await self._identities.replacement(self.identity)
        except ReplogError:
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            return
        logger.info("%s: new producer identity %s, sequences restart at 0", self.tp, fresh)
        self.identity = fresh
        self._report(self.window.reset_identity(asyncio.get_running_loop().time()))

    def _expire_queued(self, now: float) -> None:
        """Fail the queued batches (never sent) whose delivery timeout has passed."""
        while self.queue and self.queue[0].created_at + self._delivery_timeout_s <= now:
            batch = self.queue.popleft()
            _fail(
                batch,
                delivery_timeout_error(
                    self.tp,
                    batch.record_count,
                    self.config.delivery_timeout_ms,
                    self._last_error,
                    maybe_stored=False,
                ),
            )

    def _fail_queued(self, error: BaseException) -> None:
        while self.queue:
            _fail(self.queue.popleft(), error)

    def _fail_everything(self, error: BaseException) -> None:
        self._fail_queued(error)
        for entry in self.window.batches:
            _fail(entry.payload, error)
        self.window.batches.clear()
        self.window.fatal = error


def _fail(batch: ProducerBatch, error: BaseException) -> None:
    if not batch.result.done():
        batch.result.set_exception(error)
