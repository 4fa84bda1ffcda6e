"""The pure parts of the Spark sink's transactional mode: the `transactional` option, the
transactional id, the task identities under a driver epoch, and which transaction the
driver's commit ends, without Spark or a cluster."""

from __future__ import annotations

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from connectors.spark.sink_identity import (
    DriverEpoch,
    identity_from_properties,
    stream_task_identity,
)
from connectors.spark.sink_options import (
    SINK_TRANSACTIONAL_ID_PREFIX,
    parse_sink_options,
    sink_transactional_id,
    transactional_option,
)
from connectors.spark.sink_transaction import SinkTransaction
from connectors.spark.writer import (
    ReplogBatchWriter,
    ReplogCommitMessage,
    ReplogStreamWriter,
    open_transaction,
)
from spark_replica.errors import ConfigError
from spark_replica.records import DERIVED_PRODUCER_ID_BASE

QUERY = "3f1c9a52-7d7e-4a38-9b55-0d3c8b1f6e21"
OPTIONS = {"replog.bootstrap.servers": "localhost:9092", "topic": "events"}
SCHEMA = StructType([StructField("value", BinaryType())])
DRIVER = DriverEpoch(4000, 7)


@pytest.mark.parametrize(
    ("given", "expected"), [(None, False), ("true", True), ("TRUE ", True), ("false", False)]
)
def test_transactional_is_off_unless_asked(given: str | None, expected: bool) -> None:
    options = {} if given is None else {"transactional": given}
    assert transactional_option(options) is expected


@pytest.mark.parametrize("bad", ["yes", "1", ""])
def test_a_bad_transactional_value_names_the_option(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"option transactional=.*use true or false"):
        transactional_option({"transactional": bad})


def test_the_transactional_id_is_given_or_derived_from_the_checkpoint() -> None:
    assert sink_transactional_id({"transactional.id": " orders-sink "}) == "orders-sink"
    derived = sink_transactional_id({"checkpointlocation": "/data/checkpoints/q1"})
    assert derived.startswith(SINK_TRANSACTIONAL_ID_PREFIX)
    assert derived == sink_transactional_id({"checkpointlocation": "/data/checkpoints/q1"})
    assert derived != sink_transactional_id({"checkpointlocation": "/data/checkpoints/q2"})
    with pytest.raises(ConfigError, match=r"set the option transactional\.id"):
        sink_transactional_id({})
    with pytest.raises(ConfigError, match="must not be empty"):
        sink_transactional_id({"transactional.id": " "})


def test_transactional_writes_need_acks_all_and_a_stream() -> None:
    transactional = {**OPTIONS, "transactional": "true", "transactional.id": "q"}
    parsed = parse_sink_options(transactional, SCHEMA)
    assert parsed.transactional
    assert parsed.producer.transaction_timeout_ms == 60_000
    longer = {**transactional, "kafka.transaction.timeout.ms": "300000"}
    assert parse_sink_options(longer, SCHEMA).producer.transaction_timeout_ms == 300_000
    assert not parse_sink_options(OPTIONS, SCHEMA).transactional
    with pytest.raises(ConfigError, match="needs acks=all"):
        parse_sink_options({**transactional, "kafka.acks": "1"}, SCHEMA)
    with pytest.raises(ConfigError, match="applies to writeStream"):
        ReplogBatchWriter(transactional, SCHEMA, overwrite=False)
    writer = ReplogStreamWriter(transactional, SCHEMA, overwrite=False)
    assert writer.transactional_id == "q"
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        ReplogStreamWriter({**OPTIONS, "transactional": "true"}, SCHEMA, overwrite=False)


def test_task_identities_move_on_with_the_driver_epoch() -> None:
    """A task's producer keeps its id across micro-batches and takes the driver's epoch:
    a re-run after an abort writes as a new epoch; the driver's next producer id (its
    epochs ran out) gives every task a new id."""
    plain = stream_task_identity(QUERY, 2, 9)
    under = stream_task_identity(QUERY, 2, 9, DRIVER)
    assert under == stream_task_identity(QUERY, 2, 9, DRIVER)  # retries of the task
    assert under == identity_from_properties(QUERY, "9", 2, DRIVER)
    rerun = stream_task_identity(QUERY, 2, 9, DriverEpoch(4000, 8))
    next_batch = stream_task_identity(QUERY, 2, 10, DriverEpoch(4000, 9))
    other_task = stream_task_identity(QUERY, 3, 9, DRIVER)
    other_id = stream_task_identity(QUERY, 2, 9, DriverEpoch(4001, 0))
    assert under.producer_id == rerun.producer_id == next_batch.producer_id
    assert (under.epoch, rerun.epoch, next_batch.epoch) == (7, 8, 9)
    ids = {plain.producer_id, under.producer_id, other_task.producer_id, other_id.producer_id}
    assert len(ids) == 4
    for identity in (under, rerun, other_task, other_id):
        assert DERIVED_PRODUCER_ID_BASE <= identity.producer_id < 2**63
        assert identity.micro_batch == 9
    assert other_id.epoch == 0


def test_the_commit_ends_the_transaction_a_task_wrote_into() -> None:
    transaction = SinkTransaction("q", DRIVER)
    wrote = ReplogCommitMessage(0, {("events", 1): 5}, 1, 9, transaction)
    empty = ReplogCommitMessage(1, {}, 2, 9, transaction)  # no rows, or committed before
    assert open_transaction([None, empty, wrote]) == transaction
    assert open_transaction([empty, None]) is None
    assert open_transaction([ReplogCommitMessage(0, {("events", 1): 5})]) is None
