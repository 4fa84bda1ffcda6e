"""An applied UpdateMetadata is logged as one INFO line, which
benchmarks/controller_scale.py times failovers by: the line must say what it needs."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.context import BrokerContext
from brokerd.logging_setup import OneLineFormatter
from brokerd.native.controller_requests import handle_update_metadata
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    PartitionLeaderState,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from controller_scale import METADATA_LINE


def test_the_line_counts_partitions_without_a_live_leader(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = BrokerConfig(1, tmp_path, "h:1")
    ctx = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
    ctx.broker_epoch = 10
    states = [PartitionLeaderState(p, 1 + p % 3, 1, [1, 2, 3], 1, [1, 2, 3]) for p in range(6)]
    request = UpdateMetadataRequest(
        ControllerHeader(2, 5, 10),
        [BrokerInfo(1, "h", 1), BrokerInfo(2, "h", 2)],  # broker 3 is gone
        [TopicLeaderStates("t", states)],
    )
    with caplog.at_level(logging.INFO, logger="brokerd.update_metadata"):
        asyncio.run(handle_update_metadata(ctx, request))
    [record] = [r for r in caplog.records if r.name == "brokerd.update_metadata"]
    line = OneLineFormatter(1).format(record)
    found = METADATA_LINE.search(line)
    assert found is not None, line
    assert (found["controller"], found["partitions"], found["leaderless"]) == ("2", "6", "2")
    assert found["brokers"] == "1, 2"
    assert ctx.metadata.partitions_of("t") == states
