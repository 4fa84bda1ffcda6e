"""The record batch codec: header layout, CRC, payload round trips, corruption detection."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_replica.errors import CorruptRecordError
from spark_replica.records import (
    HEADER_SIZE,
    MAGIC,
    BatchHeader,
    build_batch,
    decode_payload,
    encode_batch,
    iter_batches,
    normalise_payload,
    runs_within,
    set_base_offset,
    set_leader_epoch,
    stamp_producer,
    verify_batch,
)


def test_header_is_kafkas_v2_layout_size() -> None:
    assert HEADER_SIZE == 61


def test_build_batch_fills_the_header_from_the_records() -> None:
    batch = build_batch(
        [b"a", b"b", b"c"],
        timestamps=[30, 10, 20],
        producer_id=7,
        producer_epoch=2,
        base_sequence=5,
    )
    header = BatchHeader.decode(batch)
    assert header.magic == MAGIC
    assert header.record_count == 3
    assert header.last_offset_delta == 2
    assert header.first_timestamp == 30
    assert header.max_timestamp == 30
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 5)
    assert header.total_size == len(batch)
    verify_batch(batch)


def test_offset_and_epoch_are_outside_the_crc() -> None:
    batch = bytearray(build_batch([b"x"] * 4))
    set_base_offset(batch, 1234)
    set_leader_epoch(batch, 9)
    verify_batch(batch)
    header = BatchHeader.decode(batch)
    assert (header.base_offset, header.leader_epoch, header.last_offset) == (1234, 9, 1237)


@pytest.mark.parametrize("position", [HEADER_SIZE - 5, HEADER_SIZE, -1, 25])
def test_any_flipped_covered_byte_fails_the_crc(position: int) -> None:
    batch = bytearray(build_batch([b"hello", b"world"]))
    batch[position] ^= 0x01
    with pytest.raises(CorruptRecordError):
        verify_batch(batch)


def test_truncated_batches_are_detected() -> None:
    batch = build_batch([b"hello"])
    with pytest.raises(CorruptRecordError):
        verify_batch(batch[:-1])
    with pytest.raises(CorruptRecordError):
        list(iter_batches(batch + batch[:30]))
    assert len(list(iter_batches(batch + batch[:30], allow_partial_tail=True))) == 1


def test_bad_magic_and_counts_are_refused() -> None:
    batch = bytearray(build_batch([b"x"]))
    batch[16] = 7
    with pytest.raises(CorruptRecordError, match="magic"):
        BatchHeader.decode(batch)


def test_payload_round_trip_with_nulls_and_headers() -> None:
    batch = build_batch(
        [b"v", None, "s"],
        keys=[None, b"k", "sk"],
        timestamps=[1, 2, 3],
        headers=[[("a", b"1")], None, [("b", None)]],
    )
    rows = decode_payload(batch).to_pylist()
    assert [r["value"] for r in rows] == [b"v", None, b"s"]
    assert [r["key"] for r in rows] == [None, b"k", b"sk"]
    assert [r["headers"] for r in rows] == [
        [{"key": "a", "value": b"1"}],
        None,
        [{"key": "b", "value": None}],
    ]


def test_encode_from_arrow_casts_strings_and_integer_timestamps() -> None:
    records = pa.RecordBatch.from_pydict(
        {"value": pa.array(["a", "b"]), "timestamp": pa.array([5, 6], pa.int64())}
    )
    batch = encode_batch(records)
    decoded = decode_payload(batch)
    assert decoded.column("value").to_pylist() == [b"a", b"b"]
    assert BatchHeader.decode(batch).max_timestamp == 6


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_batch_is_its_header_then_exactly_the_ipc_stream(compression: str) -> None:
    records = normalise_payload(
        pa.RecordBatch.from_pydict(
            {"value": pa.array([b"x" * n for n in range(50)]), "timestamp": list(range(50))}
        )
    )
    batch = encode_batch(records, compression=compression)
    options = pa.ipc.IpcWriteOptions(compression=None if compression == "none" else compression)
    stream = pa.BufferOutputStream()
    with pa.ipc.new_stream(stream, records.schema, options=options) as writer:
        writer.write_batch(records)
    assert bytes(batch[HEADER_SIZE:]) == stream.getvalue().to_pybytes()
    assert BatchHeader.decode(batch).total_size == len(batch)
    assert batch.readonly, "the sender may keep it without a copy"
    verify_batch(batch)


def test_a_value_column_is_required_and_must_be_binary() -> None:
    with pytest.raises(ValueError, match="value"):
        encode_batch(pa.RecordBatch.from_pydict({"key": pa.array([b"k"])}))
    with pytest.raises(ValueError, match="binary or string"):
        encode_batch(pa.RecordBatch.from_pydict({"value": pa.array([1])}))


def test_garbage_payload_is_corrupt_not_a_crash() -> None:
    batch = bytearray(build_batch([b"a"]))
    batch[HEADER_SIZE:] = b"\xff" * (len(batch) - HEADER_SIZE)
    with pytest.raises(CorruptRecordError):
        decode_payload(batch)


@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=64)), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=2**40),
)
def test_any_values_round_trip(values: list[bytes | None], timestamp: int) -> None:
    batch = build_batch(values, timestamps=[timestamp] * len(values))
    verify_batch(batch)
    assert decode_payload(batch).column("value").to_pylist() == values


def test_stamping_a_producer_keeps_the_batch_valid() -> None:
    batch = build_batch([b"a", b"b", b"c"])
    stamped = stamp_producer(batch, producer_id=77, producer_epoch=3, base_sequence=10)
    verify_batch(stamped)
    header = BatchHeader.decode(stamped)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 10)
    assert decode_payload(stamped).column("value").to_pylist() == [b"a", b"b", b"c"]
    assert BatchHeader.decode(batch).producer_id == -1, "the original is left as it was"


def test_runs_within_cut_whole_batches_into_runs_under_the_limit() -> None:
    batches = [build_batch([f"v{i}" * 50] * 3) for i in range(5)]
    size = len(batches[0])
    joined = b"".join(batches)
    runs = [bytes(run) for run in runs_within(joined, 2 * size)]
    assert b"".join(runs) == joined
    assert [len(run) // size for run in runs] == [2, 2, 1]
    # A batch larger than the limit is a run of its own; everything fits in one run.
    assert [len(run) for run in runs_within(joined, size - 1)] == [size] * 5
    assert [bytes(run) for run in runs_within(joined, len(joined))] == [joined]
    assert list(runs_within(b"", 10)) == []
