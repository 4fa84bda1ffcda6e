"""The producer's pure parts: open batches, compression codecs, and in-flight ordering.

The in-flight window is also run against the broker's own ProducerStateManager through a
simulated connection that loses answers and refuses requests, to check that retries
never reorder, duplicate or lose a batch.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

import pyarrow as pa
import pytest

from brokerd.replication.producer_state import Outcome, ProducerStateManager
from spark_replica.client import ProducerConfig
from spark_replica.client.accumulator import OpenBatch, estimate_record_bytes
from spark_replica.client.delivery_timeout import delivery_timeout_error
from spark_replica.client.in_flight import (
    SEQUENCE_SPACE,
    BatchState,
    PartitionWindow,
    WindowBatch,
)
from spark_replica.client.retry import RetryPolicy
from spark_replica.errors import (
    ConfigError,
    ConnectionLostError,
    InvalidProducerEpochError,
    MessageTooLargeError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    TimeoutExpiredError,
    UnknownProducerIdError,
)
from spark_replica.records import (
    BatchHeader,
    build_batch,
    decode_payload,
    encode_batch,
    stamp_producer,
    verify_batch,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_ALL, ACKS_LEADER
from tests.support import idempotent_header

POLICY = RetryPolicy(backoff_s=0.1, max_backoff_s=1.0)
TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)

# ------------------------------------------------------------------ accumulator


def test_an_open_batch_takes_records_as_columns_until_batch_size() -> None:
    batch = OpenBatch(opened_at=10.0)
    assert batch.add(b"a", None, 1, None, 60, None, batch_bytes=100)
    assert not batch.add(b"b", b"k", 2, None, 60, None, batch_bytes=100), "would pass 100"
    assert batch.add(b"c", b"k", 3, None, 40, None, batch_bytes=100)
    assert (batch.values, batch.keys, batch.timestamps) == ([b"a", b"c"], [None, b"k"], [1, 3])
    assert batch.size_bytes == 100 and batch.is_full(batch_bytes=100, batch_records=10)
    assert batch.headers is None, "no header column while no record has headers"


def test_a_record_larger_than_batch_size_makes_a_batch_of_one() -> None:
    batch = OpenBatch(opened_at=0.0)
    assert batch.add(b"huge", None, 1, None, 500, None, batch_bytes=100)
    assert batch.is_full(batch_bytes=100, batch_records=10)
    assert not batch.add(b"next", None, 1, None, 1, None, batch_bytes=100)


def test_headers_and_callbacks_are_kept_only_for_the_records_that_have_them() -> None:
    def callback(metadata: object, error: BaseException | None) -> None:
        raise AssertionError("not called here")

    batch = OpenBatch(opened_at=0.0)
    batch.add(b"a", None, 1, None, 1, None, batch_bytes=100)
    batch.add(b"b", None, 1, [("h", b"x")], 1, callback, batch_bytes=100)
    batch.add(b"c", None, 1, None, 1, None, batch_bytes=100)
    assert batch.headers == [None, [("h", b"x")], None]
    assert batch.callbacks == [(1, callback)]
    assert len(batch) == 3 and not batch.is_full(batch_bytes=100, batch_records=4)
    assert batch.is_full(batch_bytes=100, batch_records=3)


def test_an_open_batch_lingers_from_its_first_record() -> None:
    batch = OpenBatch(opened_at=10.0)
    assert not batch.lingered(0.5, now=10.49)
    assert batch.lingered(0.5, now=10.5)


def test_record_size_estimate_counts_key_value_and_headers() -> None:
    bare = estimate_record_bytes(None, None, None)
    assert estimate_record_bytes(b"v" * 100, b"k" * 10, [("h", b"x" * 5)]) > bare + 115


# ------------------------------------------------------------------ compression


@pytest.mark.parametrize(("codec", "bits"), [("none", 0), ("lz4", 3), ("zstd", 4)])
def test_compressed_batches_name_their_codec_and_read_back(codec: str, bits: int) -> None:
    values = [b"the same words again and again " * 20 for _ in range(200)]
    plain = build_batch(values, timestamps=[5] * 200)
    batch = build_batch(values, timestamps=[5] * 200, compression=codec)
    header = BatchHeader.decode(batch)
    assert header.attributes & 0x07 == bits
    assert header.compression == codec
    verify_batch(batch)
    assert decode_payload(batch).column("value").to_pylist() == values
    if codec != "none":
        assert len(batch) < len(plain) // 5
    stamped = stamp_producer(batch, 1, 0, 0)
    verify_batch(stamped)
    assert BatchHeader.decode(stamped).compression == codec


def test_a_bad_codec_is_a_config_error_naming_the_option() -> None:
    records = pa.record_batch([pa.array([b"v"])], names=["value"])
    with pytest.raises(ConfigError, match="compression='snappy'"):
        encode_batch(records, compression="snappy")
    with pytest.raises(ConfigError, match="compression='gzip'"):
        ProducerConfig(compression="gzip")
    assert ProducerConfig(compression="ZSTD").compression == "zstd"


def test_producer_config_defaults_to_acks_all_with_idempotence() -> None:
    """As Kafka since 3.0: a producer nobody configured neither duplicates nor reorders."""
    default = ProducerConfig()
    assert default.acks == ACKS_ALL
    assert default.idempotent
    assert default.max_in_flight_per_partition == 5
    assert ProducerConfig(acks=ACKS_LEADER).idempotent is False, "acks=1 says so explicitly"
    with pytest.raises(ConfigError, match="needs acks=all"):
        ProducerConfig(acks=ACKS_LEADER, enable_idempotence=True)


def test_producer_config_checks_batching_and_in_flight_limits() -> None:
    with pytest.raises(ConfigError, match="at most 5"):
        ProducerConfig(acks=ACKS_ALL, max_in_flight_per_partition=6)
    assert ProducerConfig(acks=ACKS_LEADER, max_in_flight_per_partition=6).idempotent is False
    for bad in ({"linger_ms": -1}, {"batch_size": 0}, {"max_in_flight_per_partition": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            ProducerConfig(**bad)


# ------------------------------------------------------------------ in-flight window


def window(max_in_flight: int = 5, idempotent: bool = True) -> PartitionWindow[str]:
    return PartitionWindow(idempotent=idempotent, max_in_flight=max_in_flight, policy=POLICY)


def started(w: PartitionWindow[str], *counts: int, deadline: float = 100.0) -> list:
    batches = []
    for n, count in enumerate(counts):
        batch = WindowBatch(f"b{n}", count, deadline)
        w.start(batch)
        batches.append(batch)
    return batches


def test_batches_are_numbered_in_send_order_up_to_the_in_flight_limit() -> None:
    w = window(max_in_flight=3)
    batches = started(w, 2, 3, 1)
    assert [b.base_sequence for b in batches] == [0, 2, 5]
    assert w.next_sequence == 6
    assert not w.can_start()
    w.on_success(batches[1])
    assert w.can_start()


def test_after_a_retriable_failure_the_later_batches_are_resent_in_order_one_by_one() -> None:
    w = window()
    first, second, third = started(w, 1, 1, 1)
    assert w.on_error(first, NotLeaderOrFollowerError(), now=0.0) == []
    # Sent behind the gap: the leader refuses them as out of order; they wait too.
    assert w.on_error(second, OutOfOrderSequenceError(), now=0.0) == []
    assert w.on_error(third, UnknownProducerIdError(), now=0.0) == []
    assert not w.can_start(), "no new batch while a retry is pending"
    assert w.due_retry(0.0) is first, "a stale leader's first retry goes after a refresh"
    w.resend(first)
    assert w.due_retry(10.0) is None, "the next one waits for the first to be answered"
    w.on_success(first)
    assert w.due_retry(10.0) is second
    w.resend(second)
    w.on_success(second)
    assert w.due_retry(10.0) is third
    assert [b.base_sequence for b in (first, second, third)] == [0, 1, 2]


def test_backoff_doubles_per_attempt_and_is_capped() -> None:
    w = window()
    (batch,) = started(w, 1)
    times = []
    now = 0.0
    for _ in range(6):
        w.on_error(batch, NotEnoughReplicasError("ISR [1]"), now=now)
        times.append(batch.retry_at - now)
        now = batch.retry_at
        w.resend(batch)
    assert times == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_the_first_retry_after_a_stale_leader_goes_at_once_then_backs_off() -> None:
    """After a failover the sender refreshes metadata and resends straight away."""
    w = window()
    (batch,) = started(w, 1)
    assert w.on_error(batch, NotLeaderOrFollowerError("moved"), now=5.0) == []
    assert w.due_retry(5.0) is batch, "no backoff before the first retry"
    w.resend(batch)
    w.on_error(batch, NotLeaderOrFollowerError("still moving"), now=6.0)
    assert batch.retry_at == pytest.approx(6.1), "the second one waits retry.backoff.ms"


def test_a_batch_refused_before_append_gives_its_numbers_to_the_ones_behind() -> None:
    w = window()
    first, big, third, fourth = started(w, 2, 5, 1, 3)
    w.on_success(first)
    failures = w.on_error(big, MessageTooLargeError(), now=0.0)
    assert [f.batch for f in failures] == [big]
    assert (third.base_sequence, fourth.base_sequence, w.next_sequence) == (2, 3, 6)
    assert third.stale_copy and fourth.stale_copy, "their copies in flight carry 7 and 8"
    for later in (third, fourth):
        assert w.on_error(later, OutOfOrderSequenceError(), now=0.0) == []
        assert later.state is BatchState.RETRY and later.retry_at == 0.0
    assert w.due_retry(0.0) is third
    assert not w.needs_new_identity


def test_a_retriable_error_past_the_deadline_fails_the_batch_as_expired() -> None:
    w = window()
    (refused,) = started(w, 2, deadline=1.0)
    assert w.on_error(refused, NotEnoughReplicasError("ISR [1]"), now=0.5) == []
    w.resend(refused)
    (failure,) = w.on_error(refused, NotEnoughReplicasError("ISR [1]"), now=0.99)
    assert failure.expired and isinstance(failure.error, NotEnoughReplicasError)
    assert not refused.maybe_appended, "refused before the append, every time"
    assert not w.needs_new_identity, "its sequence numbers were never used"
    (fatal,) = started(w, 1)
    assert not w.on_error(fatal, MessageTooLargeError(), now=0.0)[0].expired
    (appended,) = started(w, 1, deadline=1.0)
    (failure,) = w.on_error(appended, NotEnoughReplicasAfterAppendError(), now=0.99)
    assert failure.expired and appended.maybe_appended


def test_the_delivery_timeout_message_names_the_cause_and_the_records_fate() -> None:
    refused = NotEnoughReplicasError("t-0: ISR [1] is smaller than min.insync.replicas=2")
    error = delivery_timeout_error(TP, 2, 3000, refused, maybe_stored=False)
    assert isinstance(error, TimeoutExpiredError) and error.last_error is refused
    assert str(error) == (
        "t-0: 2 records not delivered within delivery_timeout_ms=3000 (3 s): not enough "
        "in-sync replicas (t-0: ISR [1] is smaller than min.insync.replicas=2); the "
        "records were not stored"
    )
    after_append = delivery_timeout_error(
        TP, 1, 30_000, NotEnoughReplicasAfterAppendError("ISR [1]"), maybe_stored=True
    )
    assert "fell below min.insync.replicas after the leader appended" in str(after_append)
    assert str(after_append).endswith("the record may or may not be stored")
    waiting = delivery_timeout_error(TP, 5, 100, None, maybe_stored=False)
    assert "still waiting behind earlier records" in str(waiting)


def test_a_fenced_epoch_stops_the_partition() -> None:
    w = window()
    first, second = started(w, 1, 1)
    w.on_error(second, OutOfOrderSequenceError(), now=0.0)
    failures = w.on_error(first, InvalidProducerEpochError(), now=0.0)
    assert [f.batch for f in failures] == [first, second]
    assert isinstance(w.fatal, InvalidProducerEpochError) and not w.can_start()


def test_without_idempotence_any_batch_is_retried_as_soon_as_its_backoff_ends() -> None:
    w = window(idempotent=False)
    first, second = started(w, 1, 1)
    assert first.base_sequence == -1
    w.on_error(first, NotLeaderOrFollowerError(), now=0.0)
    w.on_error(second, NotLeaderOrFollowerError(), now=0.05)
    w.resend(w.due_retry(0.1))
    assert w.due_retry(0.2) is second, "not held back behind the first"
    assert w.can_start()
    assert [f.batch for f in w.on_error(first, MessageTooLargeError(), now=0.2)] == [first]


def test_the_in_flight_limit_is_kafkas_for_idempotence() -> None:
    with pytest.raises(ConfigError):
        window(max_in_flight=6)
    window(max_in_flight=50, idempotent=False)


# ------------------------------------------------------------------ against the broker's state


@dataclass
class Request:
    batch: WindowBatch[int]
    sequence: int


def header_for(batch: WindowBatch[int], pid: int) -> BatchHeader:
    return idempotent_header(batch.record_count, pid, 0, batch.base_sequence)


@pytest.mark.parametrize("seed", range(40))
def test_lost_answers_and_refusals_never_reorder_duplicate_or_lose(seed: int) -> None:
    """One connection, in order; faults: refused before append, or answer lost after."""
    rng = random.Random(seed)
    pid = 2**62 + seed
    leader = ProducerStateManager()
    log: list[tuple[int, int]] = []  # (batch id, base offset)
    end = 0
    w: PartitionWindow[int] = PartitionWindow(
        idempotent=True, max_in_flight=5, policy=RetryPolicy(0.0, 0.0)
    )
    queue = deque(range(60))
    counts = {n: rng.randint(1, 4) for n in queue}
    acked: dict[int, int] = {}
    wire: deque[WindowBatch[int]] = deque()
    now = 0.0
    for _ in range(10_000):
        if not queue and not w.batches:
            break
        now += 0.001
        retry = w.due_retry(now)
        if retry is not None:
            w.resend(retry)
            wire.append(retry)
        while queue and w.can_start():
            batch_id = queue.popleft()
            batch = WindowBatch(batch_id, counts[batch_id], 1e9)
            w.start(batch)
            wire.append(batch)
        if not wire:
            continue
        batch = wire.popleft()
        fault = rng.random()
        if fault < 0.15:  # the leader moved before appending
            assert w.on_error(batch, NotLeaderOrFollowerError(), now) == []
            continue
        verdict = leader.check(header_for(batch, pid))
        if verdict.outcome is Outcome.APPEND:
            leader.record(header_for(batch, pid), end)
            log.append((batch.payload, end))
            offset, end = end, end + batch.record_count
        elif verdict.outcome is Outcome.DUPLICATE:
            offset = verdict.base_offset
        else:
            assert verdict.outcome in (Outcome.OUT_OF_ORDER, Outcome.UNKNOWN_PRODUCER)
            error = (
                OutOfOrderSequenceError()
                if verdict.outcome is Outcome.OUT_OF_ORDER
                else UnknownProducerIdError()
            )
            assert w.on_error(batch, error, now) == [], verdict.reason
            continue
        if fault < 0.3:  # appended, but the connection broke before the answer
            lost = [batch, *wire]
            wire.clear()
            for pending in lost:
                assert w.on_error(pending, ConnectionLostError(), now) == []
            continue
        w.on_success(batch)
        acked[batch.payload] = offset
    assert not queue and not w.batches, "everything was delivered"
    assert [batch_id for batch_id, _ in log] == list(range(60)), "once each, in order"
    assert acked == dict(log)
    assert w.next_sequence == sum(counts.values()) % SEQUENCE_SPACE
