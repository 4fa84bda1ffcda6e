"""The pure parts of the Spark sink: options and schema checks, producer identities,
routing and the cutting of batches, without Spark or a cluster."""

from __future__ import annotations

import asyncio
import contextlib
import pickle

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from brokerd.replication.producer_state import Outcome as BrokerOutcome
from brokerd.replication.producer_state import ProducerStateManager
from connectors.spark.schema import HEADERS_TYPE
from connectors.spark.sink_batching import BatchCutter, cut_points, power_of_two_pieces
from connectors.spark.sink_identity import (
    EPOCHS_PER_PRODUCER_ID,
    ProducerIdentity,
    identity_from_properties,
    stream_task_identity,
)
from connectors.spark.sink_options import (
    ProducerSettings,
    check_batch_save_mode,
    parse_producer_settings,
    parse_sink_options,
    topic_option,
    validate_sink_schema,
)
from connectors.spark.sink_routing import (
    RECORD_OVERHEAD_BYTES,
    Router,
    key_partitions,
    murmur2_array,
    record_sizes,
    sink_payload,
)
from connectors.spark.sink_sender import Outcome, aligned_blocks, write_batch
from connectors.spark.writer import ReplogBatchWriter, ReplogStreamWriter
from spark_replica.client.partitioner import murmur2, partition_for_key
from spark_replica.errors import ConfigError, OutOfOrderSequenceError
from spark_replica.records import DERIVED_PRODUCER_ID_BASE, HEADER_TYPE, BatchHeader
from spark_replica.wire.native.produce import ACKS_ALL, ACKS_LEADER

QUERY = "3f1c9a52-7d7e-4a38-9b55-0d3c8b1f6e21"
RUN_BYTES = 1024 * 1024


def schema(**columns: object) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])  # type: ignore[arg-type]


# --- options and schema ---------------------------------------------------------------


def test_producer_settings_default_to_acks_all_and_idempotence() -> None:
    settings_ = parse_producer_settings({})
    assert settings_ == ProducerSettings()
    assert settings_.acks == ACKS_ALL
    assert settings_.producer_config().idempotent


def test_kafka_names_are_aliases_and_must_agree() -> None:
    assert parse_producer_settings({"kafka.acks": "1"}).acks == ACKS_LEADER
    parsed = parse_producer_settings({"replog.batch.size": "2048", "kafka.batch.size": "2048"})
    assert parsed.batch_size == 2048
    with pytest.raises(ConfigError, match=r"replog\.acks and kafka\.acks"):
        parse_producer_settings({"replog.acks": "all", "kafka.acks": "1"})


def test_unknown_kafka_producer_settings_are_ignored() -> None:
    assert parse_producer_settings({"kafka.linger.ms": "5"}) == ProducerSettings()


def test_security_options_are_the_sinks_not_ignored_producer_settings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    options = {
        "replog.bootstrap.servers": "127.0.0.1:1",
        "topic": "t",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "replog.sasl.username": "alice",
        "replog.sasl.password": "pw",
    }
    assert parse_producer_settings(options) == ProducerSettings()
    assert "ignored" not in caplog.text
    parsed = parse_sink_options(options, schema(value=BinaryType()))
    assert (parsed.security.protocol, parsed.security.username) == ("SASL_PLAINTEXT", "alice")
    assert pickle.loads(pickle.dumps(parsed)) == parsed


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS"},
            r"kafka\.ssl\.truststore\.type=JKS: only PEM is supported",
        ),
        ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"}, "GSSAPI"),
        ({"kafka.sasl.kerberos.service.name": "kafka"}, "Kerberos"),
        ({"replog.ssl.truststore.location": "/ca.pem"}, r"PLAINTEXT does not use"),
        (
            {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/no/ca.pem"},
            r"ssl\.truststore\.location.*/no/ca\.pem",
        ),
    ],
)
def test_unsupported_sink_security_options_fail_by_name(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_sink_options(
            {"replog.bootstrap.servers": "127.0.0.1:1", "topic": "t", **options},
            schema(value=BinaryType()),
        )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"replog.acks": "2"}, "replog.acks='2'"),
        ({"kafka.batch.size": "0"}, "kafka.batch.size='0'"),
        ({"replog.batch.max.records": "lots"}, "replog.batch.max.records='lots'"),
        ({"replog.buffer.memory": "-1"}, "replog.buffer.memory='-1'"),
        ({"replog.batchsize": "1"}, "replog.batchsize"),
        (
            {"replog.delivery.timeout.ms": "1000", "replog.request.timeout.ms": "2000"},
            "replog.delivery.timeout.ms=1000",
        ),
    ],
)
def test_bad_producer_settings_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_producer_settings(options)
    assert named in str(caught.value)


def test_compression_and_in_flight_reach_the_producer_config() -> None:
    parsed = parse_producer_settings(
        {"kafka.compression.type": "zstd", "replog.max.in.flight.requests.per.connection": "2"}
    )
    config = parsed.producer_config()
    assert (config.compression, config.max_in_flight_per_partition) == ("zstd", 2)
    with pytest.raises(ConfigError, match=r"kafka\.compression\.type='gzip'"):
        parse_producer_settings({"kafka.compression.type": "gzip"})
    with pytest.raises(ConfigError, match=r"max\.in\.flight\.requests\.per\.connection=6"):
        parse_producer_settings({"replog.max.in.flight.requests.per.connection": "6"})


def test_retry_backoff_may_be_zero() -> None:
    assert parse_producer_settings({"replog.retry.backoff.ms": "0"}).retry_backoff_ms == 0


def test_topic_option_is_checked_against_topic_name_rules() -> None:
    assert topic_option({}) is None
    assert topic_option({"topic": " events "}) == "events"
    with pytest.raises(ConfigError, match="option topic"):
        topic_option({"topic": "no spaces"})


def test_full_kafka_schema_is_accepted() -> None:
    columns = validate_sink_schema(
        schema(
            key=BinaryType(),
            value=StringType(),
            topic=StringType(),
            partition=IntegerType(),
            headers=HEADERS_TYPE,
            other=LongType(),
        ),
        None,
    )
    assert (columns.key, columns.topic, columns.partition, columns.headers) == (
        True,
        True,
        True,
        True,
    )


def test_topic_option_overrides_the_topic_column() -> None:
    columns = validate_sink_schema(schema(value=BinaryType(), topic=LongType()), "events")
    assert not columns.topic


def test_headers_nullability_does_not_matter() -> None:
    strict = ArrayType(
        StructType(
            [
                StructField("key", StringType(), nullable=False),
                StructField("value", BinaryType(), nullable=False),
            ]
        ),
        containsNull=False,
    )
    assert validate_sink_schema(schema(value=BinaryType(), headers=strict), "t").headers


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        ({"key": BinaryType()}, "'value' column"),
        ({"value": LongType()}, "column 'value' must be binary or string, not bigint"),
        ({"value": BinaryType(), "key": IntegerType()}, "column 'key'"),
        ({"value": BinaryType(), "partition": LongType()}, "column 'partition'"),
        ({"value": BinaryType(), "headers": StringType()}, "column 'headers'"),
        ({"value": BinaryType(), "headers": ArrayType(StringType())}, "column 'headers'"),
    ],
)
def test_bad_input_columns_are_named(columns: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_sink_schema(schema(**columns), "t")
    assert named in str(caught.value)


def test_without_topic_option_a_string_topic_column_is_needed() -> None:
    with pytest.raises(ConfigError, match="'topic' option"):
        validate_sink_schema(schema(value=BinaryType()), None)
    with pytest.raises(ConfigError, match="column 'topic' must be string"):
        validate_sink_schema(schema(value=BinaryType(), topic=BinaryType()), None)


def test_overwrite_is_rejected_naming_the_mode() -> None:
    check_batch_save_mode(False)
    with pytest.raises(ConfigError, match=r"'overwrite'.*mode\('append'\)"):
        check_batch_save_mode(True)


# --- producer identity ----------------------------------------------------------------


def test_identity_is_stable_and_in_the_derived_range() -> None:
    first = stream_task_identity(QUERY, 3, 17)
    assert first == stream_task_identity(QUERY, 3, 17)
    assert DERIVED_PRODUCER_ID_BASE <= first.producer_id < 2**63
    assert first.epoch == 17


def test_identity_differs_by_query_and_task_partition() -> None:
    ids = {
        stream_task_identity(query, partition, 5).producer_id
        for query in (QUERY, "another-query")
        for partition in range(50)
    }
    assert len(ids) == 100


def test_batches_share_an_id_within_a_block_and_move_on_after_it() -> None:
    last = EPOCHS_PER_PRODUCER_ID - 1
    early, late = stream_task_identity(QUERY, 0, 0), stream_task_identity(QUERY, 0, last)
    assert early.producer_id == late.producer_id
    assert (early.epoch, late.epoch) == (0, last)
    after = stream_task_identity(QUERY, 0, EPOCHS_PER_PRODUCER_ID)
    assert after.producer_id != early.producer_id
    assert after.epoch == 0


def test_identity_from_task_properties() -> None:
    assert identity_from_properties(QUERY, "9", 2) == stream_task_identity(QUERY, 2, 9)
    with pytest.raises(ConfigError, match="structured streaming"):
        identity_from_properties(None, "1", 0)
    with pytest.raises(ConfigError, match="not a micro-batch id"):
        identity_from_properties(QUERY, "x", 0)


# --- murmur2 and routing --------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=41)), min_size=1, max_size=60))
def test_vectorised_murmur2_matches_kafkas(keys: list[bytes | None]) -> None:
    array = pa.array([None, *keys], pa.binary()).slice(1)  # an offset, as Spark's slices have
    hashed = murmur2_array(array).to_pylist()
    for key, value in zip(keys, hashed, strict=True):
        if key is not None:
            assert value == murmur2(key) & 0xFFFFFFFF
    present = [k for k in keys if k is not None]
    if present:
        partitions = key_partitions(pa.array(present, pa.binary()), 7).to_pylist()
        assert partitions == [partition_for_key(k, 7) for k in present]


def test_string_keys_hash_as_their_utf8_bytes() -> None:
    keys = ["21", "foobar", "ключ"]
    got = key_partitions(pa.array(keys, pa.string()), 5).to_pylist()
    assert got == [partition_for_key(k.encode(), 5) for k in keys]


def chunk_of(**columns: list[object]) -> pa.RecordBatch:
    types = {
        "key": pa.binary(),
        "value": pa.string(),
        "topic": pa.string(),
        "partition": pa.int32(),
    }
    return pa.RecordBatch.from_pydict({n: pa.array(v, types[n]) for n, v in columns.items()})


def route_all(
    router: Router, chunks: list[pa.RecordBatch], counts: dict[str, int]
) -> dict[tuple[str, int], list[bytes]]:
    """Values per topic-partition in routing order, over chunks routed one by one."""
    out: dict[tuple[str, int], list[bytes]] = {}
    for chunk in chunks:
        names = chunk.schema.names
        payload = sink_payload(chunk, "key" in names, "headers" in names)
        topics = router.topics(chunk)
        for routed in router.route(chunk, payload, topics, counts):
            values = routed.records.column("value").to_pylist()
            out.setdefault((routed.topic, routed.partition), []).extend(values)
    return out


def test_keys_go_where_kafka_puts_them_and_partition_column_wins() -> None:
    chunk = chunk_of(
        key=[b"a", b"b", b"c", b"a"],
        value=["1", "2", "3", "4"],
        partition=[None, None, 2, None],
    )
    routed = route_all(Router("t", 0, RUN_BYTES), [chunk], {"t": 3})
    expected: dict[tuple[str, int], list[bytes]] = {}
    for key, value, partition in [(b"a", b"1", None), (b"b", b"2", None), (b"c", b"3", 2)]:
        chosen = partition if partition is not None else partition_for_key(key, 3)
        expected.setdefault(("t", chosen), []).append(value)
    expected[("t", partition_for_key(b"a", 3))].append(b"4")
    assert routed == expected


def test_keyless_records_stick_to_a_partition_for_a_run_of_bytes() -> None:
    # Each record takes 1 value byte + 16 bytes of overhead: runs of 34 bytes hold two.
    chunk = chunk_of(value=[str(i) for i in range(7)])
    routed = route_all(Router("t", 1, run_bytes=34), [chunk], {"t": 3})
    assert routed == {
        ("t", 1): [b"0", b"1", b"6"],
        ("t", 2): [b"2", b"3"],
        ("t", 0): [b"4", b"5"],
    }


def test_keyless_runs_start_where_told_so_micro_batches_move_on() -> None:
    chunk = chunk_of(value=["a", "b"])
    for start, partition in [(0, 0), (1, 1), (4, 1), (5, 2)]:
        routed = route_all(Router("t", start, RUN_BYTES), [chunk], {"t": 3})
        assert routed == {("t", partition): [b"a", b"b"]}
    assert stream_task_identity(QUERY, 2, 40000).micro_batch == 40000


def test_a_keyless_run_continues_across_chunks_and_skips_keyed_records() -> None:
    first = chunk_of(key=[None, b"k", None], value=["0", "1", "2"])
    second = chunk_of(key=[None, None], value=["3", "4"])
    routed = route_all(Router("t", 0, run_bytes=34), [first, second], {"t": 2})
    # Keyless bytes before "0", "2", "3", "4": 0, 17, 34, 51, so runs 0, 0, 1, 1.
    placed = [(b"0", 0), (b"1", partition_for_key(b"k", 2)), (b"2", 0), (b"3", 1), (b"4", 1)]
    expected: dict[tuple[str, int], list[bytes]] = {}
    for value, partition in placed:
        expected.setdefault(("t", partition), []).append(value)
    assert routed == expected


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=6)), st.sampled_from(["x", "y"])),
        min_size=1,
        max_size=80,
    ),
    st.lists(st.integers(min_value=1, max_value=20), min_size=1, max_size=10),
    st.integers(min_value=0, max_value=9),
)
def test_routing_ignores_how_the_input_was_chunked(
    rows: list[tuple[bytes | None, str]], cuts: list[int], task_partition: int
) -> None:
    keys = [k for k, _ in rows]
    topics = [t for _, t in rows]
    values = [str(i) for i in range(len(rows))]
    whole = chunk_of(key=keys, value=values, topic=topics)
    chunks, start = [], 0
    for size in cuts:
        if start < len(rows):
            chunks.append(whole.slice(start, size))
            start += size
    if start < len(rows):
        chunks.append(whole.slice(start))
    counts = {"x": 3, "y": 4}
    in_one = route_all(Router(None, task_partition, 40), [whole], counts)
    in_pieces = route_all(Router(None, task_partition, 40), chunks, counts)
    assert in_pieces == in_one
    assert sum(len(v) for v in in_one.values()) == len(rows)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=90), min_size=1, max_size=60),
    st.lists(st.integers(min_value=1, max_value=25), min_size=1, max_size=8),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=1, max_value=80),
)
def test_keyless_chunks_are_sliced_by_run_as_records_are_placed_one_by_one(
    lengths: list[int], cuts: list[int], partitions: int, task_partition: int, run_bytes: int
) -> None:
    # A null partition column makes the router place each record on its own; without
    # it, a keyless chunk is cut at the run boundaries. Both must agree, whatever the
    # chunking and however many runs a long record spans.
    values = ["v" * length for length in lengths]
    plain = chunk_of(value=values)
    with_column = chunk_of(value=values, partition=[None] * len(values))
    chunks, start = [], 0
    for size in [*cuts, len(values)]:
        if start < len(values):
            chunks.append(plain.slice(start, size))
            start += size
    counts = {"t": partitions}
    by_record = route_all(Router("t", task_partition, run_bytes), [with_column], counts)
    by_run = route_all(Router("t", task_partition, run_bytes), chunks, counts)
    assert by_run == by_record


def test_null_topic_without_option_names_the_row() -> None:
    router = Router(None, 0, RUN_BYTES)
    first = chunk_of(value=["a", "b"], topic=["t", "t"])
    route_all(router, [first], {"t": 1})
    with pytest.raises(ConfigError, match=r"column 'topic' is null in row 3 .*'topic' option"):
        router.topics(chunk_of(value=["c", "d"], topic=["t", None]))


def test_topic_option_overrides_null_topics() -> None:
    chunk = chunk_of(value=["a"], topic=[None])
    assert route_all(Router("t", 0, RUN_BYTES), [chunk], {"t": 1}) == {("t", 0): [b"a"]}


def test_illegal_topic_in_column_is_named() -> None:
    with pytest.raises(ConfigError, match="column 'topic'"):
        Router(None, 0, RUN_BYTES).topics(chunk_of(value=["a"], topic=["bad topic"]))


def test_partition_out_of_range_names_row_and_topic() -> None:
    chunk = chunk_of(value=["a", "b"], partition=[0, 5])
    with pytest.raises(ConfigError, match=r"'partition' is 5 in row 1 .*'t' has partitions 0..2"):
        route_all(Router("t", 0, RUN_BYTES), [chunk], {"t": 3})


def test_payload_casts_strings_and_headers() -> None:
    spark_headers = pa.list_(
        pa.field(
            "element",
            pa.struct(
                [
                    pa.field("key", pa.string(), nullable=False),
                    pa.field("value", pa.binary(), nullable=False),
                ]
            ),
            nullable=False,
        )
    )
    chunk = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["k", None], pa.string()),
            "value": pa.array(["v", None], pa.string()),
            "headers": pa.array([[{"key": "h", "value": b"xy"}], []], spark_headers),
        }
    )
    payload = sink_payload(chunk, has_key=True, has_headers=True)
    assert payload.column("key").to_pylist() == [b"k", None]
    assert payload.column("value").to_pylist() == [b"v", None]
    assert payload.column("headers").type == HEADER_TYPE
    sizes = record_sizes(payload).to_pylist()
    assert sizes[1] == RECORD_OVERHEAD_BYTES
    assert sizes[0] > RECORD_OVERHEAD_BYTES + 2 + 3


# --- cutting batches ------------------------------------------------------------------


def test_cut_points_respect_both_limits_and_take_an_oversized_record_alone() -> None:
    sizes = pa.array([10, 10, 10, 50, 10, 10, 10, 10, 10], pa.int64())
    assert cut_points(sizes, 30, 100, final=True) == [3, 4, 7, 9]
    assert cut_points(sizes, 1000, 4, final=True) == [4, 8, 9]
    assert cut_points(sizes, 30, 100, final=False) == [3, 4, 7]


def cut_all(
    cutter: BatchCutter, values: list[bytes], sizes: list[int], pieces: list[int]
) -> list[list[bytes]]:
    batches: list[pa.RecordBatch] = []
    start = 0
    for size in [*pieces, len(values)]:
        end = min(start + size, len(values))
        if end > start:
            records = pa.RecordBatch.from_pydict({"value": pa.array(values[start:end])})
            batches += cutter.add(records, pa.array(sizes[start:end], pa.int64()))
        start = end
    batches += cutter.finish()
    return [b.column("value").to_pylist() for b in batches]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60),
    st.lists(st.integers(min_value=1, max_value=15), max_size=12),
    st.integers(min_value=1, max_value=100),
    st.integers(min_value=1, max_value=8),
)
def test_batches_do_not_depend_on_input_chunking(
    sizes: list[int], pieces: list[int], max_bytes: int, max_records: int
) -> None:
    values = [str(i).encode() for i in range(len(sizes))]
    whole = cut_all(BatchCutter(max_bytes, max_records), values, sizes, [])
    chunked = cut_all(BatchCutter(max_bytes, max_records), values, sizes, pieces)
    assert chunked == whole
    assert [v for batch in whole for v in batch] == values
    for batch in whole:
        assert 1 <= len(batch) <= max_records
        batch_bytes = sum(sizes[int(v)] for v in batch)
        assert len(batch) == 1 or batch_bytes <= max_bytes


def test_cutter_holds_back_an_incomplete_batch_until_finish() -> None:
    cutter = BatchCutter(max_bytes=100, max_records=3)
    records = pa.RecordBatch.from_pydict({"value": pa.array([b"a", b"b"])})
    assert cutter.add(records, pa.array([1, 1], pa.int64())) == []
    assert cutter.pending_records == 2
    (batch,) = cutter.finish()
    assert batch.num_rows == 2
    assert cutter.finish() == []


# --- replays against the leader's idempotence rules -----------------------------------


class LeaderLog:
    """One partition's log under the broker's own idempotence rules (no I/O)."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.values: list[int] = []

    def produce(self, identity: ProducerIdentity, sequence: int, values: list[int]) -> Outcome:
        header = BatchHeader(
            len(self.values), 0, 0, 2, 0, 0, len(values) - 1, 0, 0,
            identity.producer_id, identity.epoch, sequence, len(values),
        )  # fmt: skip
        verdict = self.state.check(header)
        if verdict.outcome is BrokerOutcome.APPEND:
            self.state.record(header, len(self.values))
            self.values += values
            return Outcome.WRITTEN
        if verdict.outcome in (BrokerOutcome.DUPLICATE, BrokerOutcome.OLD_DUPLICATE):
            return Outcome.ALREADY_WRITTEN
        if verdict.outcome is BrokerOutcome.OUT_OF_ORDER:
            return Outcome.OVERLAPS
        if verdict.outcome is BrokerOutcome.FENCED:
            return Outcome.SUPERSEDED
        raise AssertionError(verdict)


def attempt(
    log: LeaderLog,
    identity: ProducerIdentity,
    values: list[int],
    max_records: int,
    batches_sent: int | None = None,
) -> None:
    """One attempt at a task whose input is `values`: cut as the stream writer cuts, then
    send the first `batches_sent` batches (all when None) as PartitionSender does."""
    cutter = BatchCutter(max_bytes=10**9, max_records=max_records, split_tail=True)
    records = pa.RecordBatch.from_pydict({"value": pa.array(values, pa.int64())})
    batches = cutter.add(records, pa.array([1] * len(values), pa.int64())) + cutter.finish()
    sequence = 0

    async def send_all() -> None:
        nonlocal sequence
        for batch in batches[:batches_sent]:
            part = batch.column("value").to_pylist()

            async def try_piece(
                offset: int, size: int, part: list[int] = part, first: int = sequence
            ) -> Outcome:
                return log.produce(identity, first + offset, part[offset : offset + size])

            if await write_batch(len(part), try_piece) is Outcome.SUPERSEDED:
                return
            sequence += len(part)

    asyncio.run(send_all())


def test_power_of_two_pieces() -> None:
    assert power_of_two_pieces(13) == [8, 4, 1]
    assert power_of_two_pieces(16) == [16]
    assert aligned_blocks(13) == [(0, 8), (8, 4), (12, 1)]
    assert aligned_blocks(16) == [(0, 16)]


def test_tail_is_split_unless_it_is_a_whole_batch() -> None:
    cutter = BatchCutter(max_bytes=10**9, max_records=8, split_tail=True)
    records = pa.RecordBatch.from_pydict({"value": pa.array(range(8 + 8 + 7))})
    sizes = pa.array([1] * 23, pa.int64())
    batches = cutter.add(records, sizes) + cutter.finish()
    assert [b.num_rows for b in batches] == [8, 8, 4, 2, 1]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=1, max_value=120),
    st.lists(st.integers(min_value=0, max_value=120), max_size=3),
    st.integers(min_value=1, max_value=16),
)
def test_replays_after_inputs_cut_short_write_each_record_once(
    total: int, cut_at: list[int], max_records: int
) -> None:
    """Attempts whose input ended early (each writing its shortened last batch in
    pieces), then an attempt with the whole input: the log holds every record once.

    An attempt cut shorter than an earlier one may fail (its task fails anyway, for the
    upstream failure that cut it), but never writes out of place."""
    identity = stream_task_identity(QUERY, 0, 7)
    log = LeaderLog()
    values = list(range(total))
    for cut in cut_at:
        with contextlib.suppress(OutOfOrderSequenceError):
            attempt(log, identity, values[: min(cut, total)], max_records)
        assert log.values == values[: len(log.values)]
    attempt(log, identity, values, max_records)
    assert log.values == values


@settings(max_examples=80, deadline=None)
@given(
    st.integers(min_value=1, max_value=120),
    st.integers(min_value=0, max_value=20),
    st.integers(min_value=1, max_value=16),
)
def test_replay_after_an_attempt_died_between_batches(
    total: int, batches_sent: int, max_records: int
) -> None:
    identity = stream_task_identity(QUERY, 1, 3)
    log = LeaderLog()
    values = list(range(total))
    attempt(log, identity, values, max_records, batches_sent)
    attempt(log, identity, values, max_records)
    assert log.values == values


def test_a_replay_whose_own_input_is_cut_short_fails_instead_of_writing() -> None:
    identity = stream_task_identity(QUERY, 0, 1)
    log = LeaderLog()
    values = list(range(30))
    attempt(log, identity, values, max_records=16)
    with pytest.raises(OutOfOrderSequenceError, match="cut short"):
        attempt(log, identity, values[:21], max_records=16)
    assert log.values == values


# --- replays after a checkpoint rollback ------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([0, 9, EPOCHS_PER_PRODUCER_ID - 3]),
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40)),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 8),
    st.data(),
)
def test_micro_batches_replayed_after_a_rollback_write_each_record_once(
    first_batch: int,
    micro_batches: list[tuple[int, int, int]],
    max_records: int,
    data: st.DataObject,
) -> None:
    """Two tasks per micro-batch write one partition (each may first have an attempt
    cut short); the checkpoint is rolled back to any earlier micro-batch and the rest run
    again, whole. Batch ids may cross a producer-id block boundary (32768 batches).

    No replay fails, and the log holds every record once, each task's in input order."""
    log = LeaderLog()
    inputs: dict[tuple[int, int], list[int]] = {}
    for index, (first_task, second_task, _) in enumerate(micro_batches):
        for task, count in enumerate((first_task, second_task)):
            start = len(inputs) * 100
            inputs[(index, task)] = list(range(start, start + count))
    for index, (_, _, cut) in enumerate(micro_batches):
        for task in (0, 1):
            identity = stream_task_identity(QUERY, task, first_batch + index)
            values = inputs[(index, task)]
            if cut < len(values):
                attempt(log, identity, values[:cut], max_records)
            attempt(log, identity, values, max_records)
    rolled_back_to = data.draw(st.integers(0, len(micro_batches) - 1), label="rolled back to")
    for index in range(rolled_back_to, len(micro_batches)):
        for task in (0, 1):
            identity = stream_task_identity(QUERY, task, first_batch + index)
            attempt(log, identity, inputs[(index, task)], max_records)
    assert sorted(log.values) == sorted(v for values in inputs.values() for v in values)
    for (index, task), values in inputs.items():
        assert [v for v in log.values if v in set(values)] == values, (index, task)


def test_a_stale_attempt_of_an_earlier_micro_batch_is_skipped_not_failed() -> None:
    log = LeaderLog()
    earlier, later = list(range(0, 25)), list(range(100, 107))
    attempt(log, stream_task_identity(QUERY, 0, 3), earlier[:11], max_records=4)
    attempt(log, stream_task_identity(QUERY, 0, 3), earlier, max_records=4)
    attempt(log, stream_task_identity(QUERY, 0, 4), later, max_records=4)
    attempt(log, stream_task_identity(QUERY, 0, 3), earlier, max_records=4)
    assert log.values == earlier + later


def test_a_batch_superseded_while_written_in_pieces_stops_there() -> None:
    tried: list[tuple[int, int]] = []

    async def try_piece(offset: int, size: int) -> Outcome:
        tried.append((offset, size))
        if (offset, size) == (0, 13):
            return Outcome.OVERLAPS
        return Outcome.ALREADY_WRITTEN if offset == 0 else Outcome.SUPERSEDED

    assert asyncio.run(write_batch(13, try_piece)) is Outcome.SUPERSEDED
    assert tried == [(0, 13), (0, 8), (8, 4)]


# --- the writers ----------------------------------------------------------------------


def test_writers_check_on_construction_and_pickle_small() -> None:
    options = {"replog.bootstrap.servers": "localhost:9092", "topic": "events"}
    input_schema = schema(key=BinaryType(), value=StringType())
    for writer in (
        ReplogBatchWriter(options, input_schema, overwrite=False),
        ReplogStreamWriter(options, input_schema, overwrite=True),  # complete mode appends
    ):
        shipped = pickle.dumps(writer)
        assert len(shipped) < 1000
        assert pickle.loads(shipped).sink == writer.sink
    with pytest.raises(ConfigError, match="'overwrite'"):
        ReplogBatchWriter(options, input_schema, overwrite=True)
    with pytest.raises(ConfigError, match="column 'value'"):
        ReplogStreamWriter(options, schema(value=LongType()), overwrite=False)
