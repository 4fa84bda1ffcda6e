"""`replog groups`: its arguments, lag and reset arithmetic, and the consumer protocol's
assignment decoding, with plain values."""

from __future__ import annotations

import pytest

from spark_replica.client import parse_bootstrap as parse_bootstrap_servers
from spark_replica.client.kafka_admin import GroupDescription, GroupMember
from spark_replica.errors import ConfigError, ProtocolError
from spark_replica.tools.cli.groups import strategy_of
from spark_replica.tools.cli.groups_plan import (
    EARLIEST,
    LATEST,
    SHIFT_BY,
    TO_DATETIME,
    TO_OFFSET,
    ResetStrategy,
    parse_datetime,
    parse_partitions,
    reset_plan,
)
from spark_replica.tools.cli.main import build_parser
from spark_replica.tools.group_lag import Owner, lag, lag_rows, owners
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.consumer_protocol import (
    MemberAssignment,
    decode_assignment,
    encode_assignment,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def parse(*argv: str):
    return build_parser().parse_args(["groups", *argv])


def test_reset_arguments_need_one_scope_and_one_target(capsys) -> None:
    args = parse("reset-offsets", "g", "--topic", "a:0,1", "--topic", "b", "--shift-by", "-5")
    assert args.topic == ["a:0,1", "b"] and strategy_of(args) == ResetStrategy(SHIFT_BY, -5)
    assert not args.execute and args.bootstrap is None
    executed = parse("reset-offsets", "g", "--all-topics", "--to-earliest", "--execute")
    assert executed.all_topics and executed.execute and strategy_of(executed).kind == EARLIEST
    for argv in (
        ("reset-offsets", "g", "--to-latest"),
        ("reset-offsets", "g", "--all-topics"),
        ("reset-offsets", "g", "--all-topics", "--topic", "a", "--to-latest"),
        ("reset-offsets", "g", "--all-topics", "--to-latest", "--to-earliest"),
    ):
        with pytest.raises(SystemExit):
            parse(*argv)
    assert "not allowed with" in capsys.readouterr().err


def test_connection_options() -> None:
    args = parse("describe", "g", "--bootstrap-server", "h:1,h:2", "--json")
    assert args.bootstrap == "h:1,h:2" and args.json
    assert parse("list", "--bootstrap", "h:1").bootstrap == "h:1"
    with pytest.raises(SystemExit):
        parse("list", "--bootstrap-server", "h:1", "--zookeeper", "z:2")
    assert parse_bootstrap_servers("h:1, [::1]:2") == [("h", 1), ("::1", 2)]
    for bad in ("h", "h:x", ":1", "h:0"):
        with pytest.raises(ConfigError, match="host:port"):
            parse_bootstrap_servers(bad)


def test_datetime_and_offset_targets() -> None:
    args = parse("reset-offsets", "g", "--all-topics", "--to-datetime", "1970-01-01T00:00:01")
    assert strategy_of(args) == ResetStrategy(TO_DATETIME, 1000)
    assert parse_datetime("1970-01-01T01:00:00+01:00") == 0
    assert parse_datetime("1970-01-01T00:00:00.250Z") == 250
    with pytest.raises(ConfigError, match="ISO 8601"):
        parse_datetime("yesterday")
    with pytest.raises(ConfigError, match="0 or more"):
        strategy_of(parse("reset-offsets", "g", "--all-topics", "--to-offset", "-1"))


def test_partition_specs() -> None:
    assert parse_partitions("a") == ("a", None)
    assert parse_partitions("a:2,0,2") == ("a", [0, 2])
    for bad in (":1", "a:x", "a:-1", "a:"):
        with pytest.raises(ConfigError, match="--topic"):
            parse_partitions(bad)


def test_lag_is_log_end_minus_committed_never_negative() -> None:
    assert lag(5, 12) == 7
    assert lag(12, 5) == 0
    assert lag(None, 5) is None and lag(3, None) is None and lag(-1, 5) is None
    owner = Owner("m-1", "/10.0.0.1", "c")
    rows = lag_rows({A1: 4, A0: -1}, {A0: 9, A1: 10, B0: 3}, {B0: owner, A0: owner})
    assert [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag) for r in rows] == [
        ("a", 0, None, 9, None),
        ("a", 1, 4, 10, 6),
        ("b", 0, None, 3, None),
    ]
    assert rows[1].owner is None and rows[2].as_json()["consumer_id"] == "m-1"


EARLIEST_OFFSETS = {A0: 10, A1: 0}
LATEST_OFFSETS = {A0: 100, A1: 50}


def plan(strategy: ResetStrategy, committed=None, at_time=None):
    committed = {A0: 40, A1: 20} if committed is None else committed
    return reset_plan(
        strategy, [A1, A0], committed, EARLIEST_OFFSETS, LATEST_OFFSETS, at_time=at_time
    )


def test_reset_targets_are_clamped_into_the_log() -> None:
    assert plan(ResetStrategy(EARLIEST)) == {A0: 10, A1: 0}
    assert plan(ResetStrategy(LATEST)) == {A0: 100, A1: 50}
    assert plan(ResetStrategy(TO_OFFSET, 30)) == {A0: 30, A1: 30}
    assert plan(ResetStrategy(TO_OFFSET, 5)) == {A0: 10, A1: 5}
    assert plan(ResetStrategy(TO_OFFSET, 70)) == {A0: 70, A1: 50}
    assert plan(ResetStrategy(SHIFT_BY, -35)) == {A0: 10, A1: 0}
    assert plan(ResetStrategy(SHIFT_BY, 45)) == {A0: 85, A1: 50}
    assert list(plan(ResetStrategy(EARLIEST))) == [A0, A1]


def test_datetime_past_the_last_record_goes_to_the_log_end() -> None:
    assert plan(ResetStrategy(TO_DATETIME, 123), at_time={A0: 60, A1: -1}) == {A0: 60, A1: 50}


def test_shift_needs_a_committed_offset_and_every_partition_needs_its_bounds() -> None:
    with pytest.raises(ConfigError, match="a-1 has none"):
        plan(ResetStrategy(SHIFT_BY, 1), committed={A0: 3})
    with pytest.raises(ConfigError, match="b-0"):
        reset_plan(ResetStrategy(LATEST), [B0], {}, EARLIEST_OFFSETS, LATEST_OFFSETS)
    with pytest.raises(ConfigError):
        ResetStrategy("sideways")


def test_assignment_decodes_as_the_consumer_protocol_lays_it_out() -> None:
    # version 1; [("a", [1, 0]), ("b", [0])]; user data b"u"
    data = (
        b"\x00\x01"
        + b"\x00\x00\x00\x02"
        + b"\x00\x01a"
        + b"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00"
        + b"\x00\x01b"
        + b"\x00\x00\x00\x01\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01u"
    )
    decoded = decode_assignment(data)
    assert decoded == MemberAssignment(1, [A1, A0, B0], b"u")
    assert encode_assignment(decoded) == data
    assert decode_assignment(b"") == MemberAssignment(0, [])
    no_user_data = b"\x00\x00" + b"\x00\x00\x00\x00"
    assert decode_assignment(no_user_data) == MemberAssignment(0, [], None)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",
        b"\xff\xff\x00\x00\x00\x00",
        b"\x00\x00\x7f\xff\xff\xff",
        b"\x00\x00\xff\xff\xff\xff",
        b"\x00\x00\x00\x00\x00\x01\x00\x05ab",
        b"\x00\x00\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x02\x00\x00\x00\x01",
    ],
)
def test_malformed_assignments_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_assignment(data)


def test_owners_come_from_consumer_assignments_only() -> None:
    good = encode_assignment(MemberAssignment(0, [A0, B0]))
    members = [
        GroupMember("m-1", "c1", "/h1", good),
        GroupMember("m-2", "c2", "/h2", b"\x00"),  # does not decode: owns nothing shown
    ]
    found = owners(GroupDescription("g", "Stable", "consumer", "range", members))
    assert found == {A0: Owner("m-1", "/h1", "c1"), B0: Owner("m-1", "/h1", "c1")}
    assert owners(GroupDescription("g", "Stable", "connect", "x", members)) == {}
