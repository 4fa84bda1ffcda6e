"""Storage of one partition replica: segmented log files with sparse indexes."""

from brokerd.log.checkpoint import (
    HW_CHECKPOINT_FILE,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from brokerd.log.config import LogConfig
from brokerd.log.epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_END,
    UNDEFINED_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from brokerd.log.log import AppendInfo, Log

__all__ = [
    "HW_CHECKPOINT_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_END",
    "UNDEFINED_OFFSET",
    "AppendInfo",
    "EpochEntry",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "read_offsets_checkpoint",
    "write_offsets_checkpoint",
]
