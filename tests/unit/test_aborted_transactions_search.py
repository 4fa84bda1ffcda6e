"""The aborted-transaction search and the LSO against their definitions, on real logs of
interleaved transactions over many small segments (hypothesis drives the interleaving).

Definitions: a fetch of [start, end) must list every aborted transaction with a record
in the range, i.e. first offset < end and marker offset >= start; the LSO is the HW or
the first offset of the earliest transaction open or ended by a marker at or past the HW.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition, TxnMarker
from spark_replica.records import TRANSACTIONAL_FLAG, ControlType, build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER

PRODUCERS = 4
# One step: (producer, action) with action 0 = write a transactional batch, 1 = commit,
# 2 = abort, 3 = write a batch outside transactions (producer id -1).
steps = st.lists(st.tuples(st.integers(0, PRODUCERS - 1), st.integers(0, 3)), max_size=60)


class Model:
    """What happened, with offsets: each transaction's first offset and marker."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}
        self.ended: list[tuple[int, int, int, bool]] = []  # pid, first, marker, aborted


def play(partition: Partition, script: list[tuple[int, int]]) -> Model:
    model = Model()
    sequences = [0] * PRODUCERS
    for producer, action in script:
        end = partition.log.log_end_offset
        if action == 0:
            batch = build_batch(
                [b"r"] * (1 + producer),
                timestamps=[0] * (1 + producer),
                attributes=TRANSACTIONAL_FLAG,
                producer_id=producer,
                producer_epoch=0,
                base_sequence=sequences[producer],
            )
            sequences[producer] += 1 + producer
            partition.append_as_leader(batch, ACKS_LEADER, now_ms=0)
            model.open.setdefault(producer, end)
        elif action in (1, 2):
            kind = ControlType.COMMIT if action == 1 else ControlType.ABORT
            partition.append_markers([TxnMarker(producer, 0, 0, kind)], now_ms=0)
            first = model.open.pop(producer, end)
            model.ended.append((producer, first, end, action == 2))
        else:
            partition.append_as_leader(build_batch([b"p"], timestamps=[0]), ACKS_LEADER, 0)
    return model


@settings(max_examples=60, deadline=None)
@given(script=steps, ranges=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 40))))
def test_the_search_finds_exactly_the_aborted_transactions_of_a_range(
    script: list[tuple[int, int]], ranges: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        log = Log.open(Path(directory), LogConfig(segment_bytes=1_500), now_ms=0)
        partition = Partition(TopicPartition("t", 0), log, local_broker_id=1)
        partition.make_leader(0, [1], [1], 0, 0, now_ms=0)
        model = play(partition, script)
        check(partition, model, [*ranges, (0, log.log_end_offset + 1)])
        log.close()
        # Reopened, the active segment is recovered and its index rebuilt from the log.
        log = Log.open(Path(directory), LogConfig(segment_bytes=1_500), now_ms=0)
        reopened = Partition(TopicPartition("t", 0), log, 1, high_watermark=log.log_end_offset)
        reopened.make_leader(1, [1], [1], 0, 0, now_ms=0)
        check(reopened, model, [*ranges, (0, log.log_end_offset + 1)])
        log.close()


def check(partition: Partition, model: Model, ranges: list[tuple[int, int]]) -> None:
    for start, length in ranges:
        found = {
            (a.producer_id, a.first_offset, a.last_offset)
            for a in partition.log.aborted_transactions(start, start + length)
        }
        expected = {
            (pid, first, marker)
            for pid, first, marker, aborted in model.ended
            if aborted and first < start + length and marker >= start
        }
        assert found == expected, (start, length)
    firsts = [*model.open.values()]
    assert partition.last_stable_offset == min([partition.high_watermark, *firsts])
