"""Reading a Spark query's committed offsets from checkpoint files written here, in the
layout pyspark 4.3 writes: which batch counts, several sources, and what is refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spark_replica.errors import ConfigError
from spark_replica.tools.cli.lag import print_lag
from spark_replica.tools.cli.main import main
from spark_replica.tools.query_lag import (
    PartitionLag,
    QueryLag,
    committed_offsets,
    lag_of,
    parse_offset_log,
)
from spark_replica.topics import TopicPartition

# The batch metadata line of a real pyspark 4.3 offsets file, shortened to two settings.
BATCH_METADATA = json.dumps(
    {
        "batchWatermarkMs": 0,
        "batchTimestampMs": 1795500585001,
        "conf": {"spark.sql.shuffle.partitions": "2"},
    }
)
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def offsets_file(*sources: str) -> str:
    """An offsets/N file as Spark writes it: no newline after the last line."""
    return "\n".join(["v1", BATCH_METADATA, *sources])


def write_checkpoint(
    root: Path, offsets: dict[int, str], commits: list[int], metadata: bool = True
) -> Path:
    """A checkpoint directory with Spark's files, hidden .crc files included."""
    root.mkdir(exist_ok=True)
    if metadata:
        (root / "metadata").write_text('{"id":"e8177110-82ef-4d6f-b2af-8a531aab73d2"}')
    (root / "offsets").mkdir()
    (root / "commits").mkdir()
    for batch_id, text in offsets.items():
        (root / "offsets" / str(batch_id)).write_text(text)
        (root / "offsets" / f".{batch_id}.crc").write_bytes(b"crc\x00")
    for batch_id in commits:
        (root / "commits" / str(batch_id)).write_text(COMMIT)
        (root / "commits" / f".{batch_id}.crc").write_bytes(b"crc\x00")
    return root


def test_the_last_committed_batch_counts_not_one_only_planned(tmp_path: Path) -> None:
    checkpoint = write_checkpoint(
        tmp_path,
        offsets={
            9: offsets_file('{"events": {"0": 1, "1": 1}}'),
            10: offsets_file('{"events": {"0": 3, "1": 4}}'),
            11: offsets_file('{"events": {"0": 7, "1": 4}}'),
        },
        commits=[9, 10],
    )
    assert committed_offsets(checkpoint) == (10, {("events", 0): 3, ("events", 1): 4})


def test_several_sources_skip_other_kinds_and_take_the_slowest_reader() -> None:
    text = offsets_file(
        '{"orders": {"0": 12, "1": 5}}',
        '{"logOffset":3}',  # a file source
        "51",  # a rate source
        "-",  # a source that had no offsets yet
        '{"orders": {"0": 10}, "users": {"0": 2}}',  # a second replog source
    )
    assert parse_offset_log(text, "offsets/4") == {
        TopicPartition("orders", 0): 10,
        TopicPartition("orders", 1): 5,
        TopicPartition("users", 0): 2,
    }


@pytest.mark.parametrize("layout", ["metadata only", "offsets but no commit"])
def test_no_commit_yet(tmp_path: Path, layout: str) -> None:
    if layout == "metadata only":
        (tmp_path / "metadata").write_text('{"id":"e8177110-82ef-4d6f-b2af-8a531aab73d2"}')
    else:
        write_checkpoint(tmp_path, offsets={0: offsets_file('{"a": {"0": 5}}')}, commits=[])
    assert committed_offsets(tmp_path) == (None, {})


def test_missing_not_a_directory_and_not_spark(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=f"checkpoint {missing} does not exist"):
        committed_offsets(missing)
    plain_file = tmp_path / "file"
    plain_file.write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        committed_offsets(plain_file)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match=f"{other} is not a Spark streaming checkpoint"):
        committed_offsets(other)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "metadata").write_text("name: something else\n")
    with pytest.raises(ConfigError, match="metadata is not Spark's"):
        committed_offsets(foreign)


def test_damaged_checkpoints_are_named(tmp_path: Path) -> None:
    lost = write_checkpoint(tmp_path / "lost-offsets", offsets={}, commits=[3])
    with pytest.raises(ConfigError, match="batch 3 is committed but offsets/3 is missing"):
        committed_offsets(lost)
    with pytest.raises(ConfigError, match=r"offsets/7: not a Spark offset log of version v1"):
        parse_offset_log('v2\n{}\n{"a": {"0": 1}}', "offsets/7")
    with pytest.raises(ConfigError, match="offsets/7: the second line is not Spark's"):
        parse_offset_log('v1\n{"a": {"0": 1}', "offsets/7")
    with pytest.raises(ConfigError, match="offsets/7: not a Spark offset log"):
        parse_offset_log("", "offsets/7")


def test_lag_and_its_json() -> None:
    assert lag_of(3, 10) == 7
    assert lag_of(12, 10) == 0  # the log lost records under the query
    assert lag_of(None, 10) is None
    assert lag_of(3, None) is None
    behind = PartitionLag("a", 2, 12, 10, 0)
    assert behind.behind_the_log
    lag = QueryLag(
        "/cp",
        4,
        [PartitionLag("a", 0, 3, 10, 7), PartitionLag("a", 1, 3, None, None), behind],
    )
    assert lag.total_lag == 7
    assert lag.as_json() == {
        "checkpoint": "/cp",
        "batch_id": 4,
        "total_lag": 7,
        "partitions": [
            {"topic": "a", "partition": 0, "committed": 3, "high_watermark": 10, "lag": 7},
            {"topic": "a", "partition": 1, "committed": 3, "high_watermark": None, "lag": None},
            {"topic": "a", "partition": 2, "committed": 12, "high_watermark": 10, "lag": 0},
        ],
    }


def test_cli_names_a_bad_checkpoint_before_asking_any_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_checkpoint(tmp_path / "good", offsets={}, commits=[])
    missing = tmp_path / "missing"
    # No broker listens on port 1: the error must come from the checkpoint alone.
    argv = ["lag", "--bootstrap", "127.0.0.1:1", "--checkpoint", str(good)]
    assert main([*argv, "--checkpoint", str(missing)]) == 2
    assert capsys.readouterr().err == f"replog: checkpoint {missing} does not exist\n"


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    print_lag(QueryLag("/cp", None, []))
    assert capsys.readouterr().out == "/cp: no micro-batch committed yet\n"
    print_lag(
        QueryLag("/cp", 4, [PartitionLag("a", 0, 3, 10, 7), PartitionLag("a", 1, 3, None, None)])
    )
    lines = capsys.readouterr().out.splitlines()
    assert "/cp (batch 4, total lag 7)" in lines[0]
    cells = [re.findall(r"[^│┃\s]+", line) for line in lines if line[0] in "│┃"]
    assert cells == [
        ["TOPIC", "PARTITION", "COMMITTED", "HW", "LAG"],
        ["a", "0", "3", "10", "7"],
        ["a", "1", "3", "-", "-"],
    ]
