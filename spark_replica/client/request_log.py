"""What the client did, one line per event, for `replog -v` and for anyone debugging a
client: each broker it connected to, each request with its answer and how long it
took, each retry with its error and its wait.

Every connection and the one retry state machine (retry.Attempts) call these, so each
tool that runs on the client shows the same lines without logging anything itself. The
lines go to the `spark_replica.client.requests` logger at INFO; nothing is formatted
unless that level is on, so a quiet client pays one level check per request.
"""

from __future__ import annotations

import logging
import time

from spark_replica.wire.native.apis import ApiKey

logger = logging.getLogger("spark_replica.client.requests")

# Kafka's names of the APIs only its listener serves (the shared ones are in ApiKey).
KAFKA_ONLY_APIS = {
    8: "OFFSET_COMMIT",
    9: "OFFSET_FETCH",
    10: "FIND_COORDINATOR",
    11: "JOIN_GROUP",
    12: "HEARTBEAT",
    13: "LEAVE_GROUP",
    14: "SYNC_GROUP",
    15: "DESCRIBE_GROUPS",
    16: "LIST_GROUPS",
    32: "DESCRIBE_CONFIGS",
    42: "DELETE_GROUPS",
}


def api_name(api_key: int, version: int) -> str:
    """`METADATA v0`, `FIND_COORDINATOR v3`: a request as a log line names it."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        name = KAFKA_ONLY_APIS.get(api_key, f"API_{api_key}")
    return f"{name} v{version}"


def enabled() -> bool:
    return logger.isEnabledFor(logging.INFO)


def started() -> float:
    """The start of a request, to pass to `answered` (a monotonic clock reading)."""
    return time.monotonic()


def connected(address: str, listener: str) -> None:
    logger.info("connected to %s (%s listener)", address, listener)


def not_connected(address: str, error: BaseException) -> None:
    logger.info("cannot connect to %s: %s", address, error)


def answered(
    address: str, request: str, correlation_id: int, since: float, error: BaseException | None
) -> None:
    """One request and its answer: `ok`, or the error's type and message."""
    if not enabled():
        return
    elapsed_ms = (time.monotonic() - since) * 1000
    outcome = "ok" if error is None else f"{type(error).__name__}: {error}"
    logger.info("%s %s #%d -> %s (%.1f ms)", address, request, correlation_id, outcome, elapsed_ms)


def retrying(error: BaseException, retry: int, delay_s: float) -> None:
    logger.info(
        "retry %d in %.0f ms after %s: %s", retry, delay_s * 1000, type(error).__name__, error
    )


def giving_up(error: BaseException, retries: int) -> None:
    logger.info("giving up after %d retries: %s: %s", retries, type(error).__name__, error)
