"""`replog topics delete-records --offset-json-file F`: Kafka's kafka-delete-records.

The file has Kafka's layout, `{"partitions": [{"topic": "t", "partition": 0, "offset":
10}], "version": 1}`: each partition loses its records below its offset, and offset -1
deletes everything below the high watermark. The file is checked whole before anything
is sent (exit 2 if it is malformed); each partition then has its own outcome, printed
as a table or with `--json` as one document `{"partitions": [{"topic", "partition",
"low_watermark"} or {"topic", "partition", "error"}]}`. Exit 1 if any partition was
refused.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from spark_replica.client import Admin
from spark_replica.errors import ConfigError, ReplogError
from spark_replica.tools.cli.exit_codes import OK, exit_code_of
from spark_replica.tools.cli.output import print_json, print_table
from spark_replica.topics import TopicPartition, validate_topic_name
from spark_replica.wire.native.delete_records import DELETE_TO_HIGH_WATERMARK

OFFSET_FILE_VERSION = 1
COLUMNS = ("TOPIC", "PARTITION", "LOW-WATERMARK", "ERROR")


def parse_offset_file(text: str, source: str) -> dict[TopicPartition, int]:
    """The offset of each partition in a Kafka offset JSON file; ConfigError if it is not
    one, naming `source` and what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(document, dict) or not isinstance(document.get("partitions"), list):
        raise ConfigError(f'{source}: expected {{"partitions": [...], "version": 1}}')
    version = document.get("version", OFFSET_FILE_VERSION)
    if version != OFFSET_FILE_VERSION:
        raise ConfigError(f"{source}: unsupported version {version!r}; only 1 is known")
    offsets: dict[TopicPartition, int] = {}
    for index, entry in enumerate(document["partitions"]):
        tp, offset = _entry(entry, f"{source}: partitions[{index}]")
        if tp in offsets:
            raise ConfigError(f"{source}: partitions[{index}]: {tp} is listed twice")
        offsets[tp] = offset
    if not offsets:
        raise ConfigError(f"{source}: lists no partitions")
    return offsets


def _entry(entry: Any, where: str) -> tuple[TopicPartition, int]:
    if not isinstance(entry, dict) or set(entry) != {"topic", "partition", "offset"}:
        raise ConfigError(f'{where}: expected {{"topic": ..., "partition": ..., "offset": ...}}')
    topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
    if not isinstance(topic, str):
        raise ConfigError(f"{where}: topic must be a string, not {topic!r}")
    validate_topic_name(topic)
    if not _is_int(partition) or partition < 0:
        raise ConfigError(f"{where}: partition must be a non-negative integer, not {partition!r}")
    if not _is_int(offset) or offset < DELETE_TO_HIGH_WATERMARK:
        raise ConfigError(
            f"{where}: offset must be a non-negative integer or -1 (the high watermark), "
            f"not {offset!r}"
        )
    return TopicPartition(topic, partition), offset


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_offset_file(path: Path) -> dict[TopicPartition, int]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the offset file {path}: {exc}") from None
    return parse_offset_file(text, str(path))


async def delete_records(args: argparse.Namespace, admin: Admin) -> int:
    """Delete what the offset file says; print each partition's outcome; the exit code."""
    offsets = read_offset_file(Path(args.offset_json_file))
    outcomes = await admin.delete_records(offsets)
    rows = [
        {"topic": tp.topic, "partition": tp.partition, **_outcome_json(outcome)}
        for tp, outcome in sorted(outcomes.items())
    ]
    if args.json:
        print_json({"partitions": rows})
    else:
        print_table(
            COLUMNS,
            [
                [row["topic"], row["partition"], row.get("low_watermark", ""), row.get("error", "")]
                for row in rows
            ],
        )
    return max(
        (exit_code_of(o) for o in outcomes.values() if isinstance(o, ReplogError)), default=OK
    )


def _outcome_json(outcome: int | ReplogError) -> dict[str, object]:
    if isinstance(outcome, ReplogError):
        return {"error": f"{type(outcome).__name__}: {outcome}"}
    return {"low_watermark": outcome}
