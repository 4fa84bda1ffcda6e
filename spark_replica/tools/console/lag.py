"""The lag of the Spark queries the console was given, one checkpoint at a time.

A checkpoint whose lag cannot be read (not there yet, not Spark's, its partitions'
leaders unreachable) is shown with the reason instead of failing the others.
"""

from __future__ import annotations

from pathlib import Path

from spark_replica.client import Cluster
from spark_replica.errors import ReplogError
from spark_replica.tools.query_lag import query_lag


async def checkpoint_lag(cluster: Cluster, checkpoint: Path) -> dict[str, object]:
    try:
        lag = await query_lag(cluster, checkpoint)
    except (ReplogError, OSError, NotImplementedError) as exc:
        reason = str(exc) or type(exc).__name__
        return {"checkpoint": str(checkpoint), "error": reason}
    return {**lag.as_json(), "checkpoint": str(checkpoint), "error": None}


async def lag_json(cluster: Cluster, checkpoints: list[Path]) -> dict[str, object]:
    return {"queries": [await checkpoint_lag(cluster, c) for c in checkpoints]}
