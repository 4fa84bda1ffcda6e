"""What a `replog` command's exit status means: the same three values in every command,
so that a script can tell a typo from an outage without reading the message.

- 0: the command did what it was asked (or its reader stopped reading, `| head -1`);
- 1: an operation failed: a broker or ZooKeeper refused or could not be reached, a
  topic did not exist, a record was not acknowledged, a partition did not move;
- 2: the command line or its input was wrong: an unknown flag, a bad config value, an
  invalid topic name, partition count or replication factor, a malformed input line.

The brokers' refusals of bad requests count as bad input wherever they are decided, so a
bad config value exits 2 whether the CLI or a broker finds it.
"""

from __future__ import annotations

from spark_replica.errors import (
    ConfigError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    ReplogError,
)

OK = 0
FAILED = 1
BAD_INPUT = 2

# Errors that say the request was wrong, not that the cluster failed to carry it out.
BAD_INPUT_ERRORS: tuple[type[ReplogError], ...] = (
    ConfigError,
    InvalidConfigError,
    InvalidTopicError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidReplicaAssignmentError,
    InvalidRequiredAcksError,
)

EPILOG = (
    "exit status: 0 done; 1 an operation failed (a broker or ZooKeeper refused or was "
    "unreachable, a record was not acknowledged); 2 bad usage or input (an unknown flag, "
    "a bad config value, an invalid topic name, partition count or replication factor). "
    "A reader that stops reading (| head -1) ends a command quietly with 0."
)


def exit_code_of(error: ReplogError) -> int:
    return BAD_INPUT if isinstance(error, BAD_INPUT_ERRORS) else FAILED
