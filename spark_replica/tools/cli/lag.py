"""`replog lag --checkpoint DIR [--checkpoint DIR2 ...]`: how far Spark queries are behind.

For each checkpoint it prints every partition the query's last committed micro-batch
reached: the offset the query reads next, the partition's high watermark and the
difference. A partition whose HW is unknown (no leader answered, topic deleted) or that
the query stands past (the log lost records) is shown in red.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from spark_replica.client import Cluster
from spark_replica.tools.cli.common import add_connection_options, run_with_cluster
from spark_replica.tools.cli.output import add_json_flag, print_json, print_table
from spark_replica.tools.cli.progress import waiting

if TYPE_CHECKING:
    from spark_replica.tools.query_lag import QueryLag

COLUMNS = ("TOPIC", "PARTITION", "COMMITTED", "HW", "LAG")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lag", help="how far Spark streaming queries are behind, from their checkpoints"
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        action="append",
        required=True,
        metavar="DIR",
        help="a query's checkpointLocation, a local directory; repeat for several queries "
        "(required)",
    )
    add_json_flag(parser)
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # The checkpoint reader decodes offsets with the Spark connector, which imports
    # pyspark: imported here, only `replog lag` pays for it, not every command.
    from spark_replica.tools.query_lag import check_checkpoint, query_lag

    for checkpoint in args.checkpoint:
        check_checkpoint(checkpoint)  # a wrong path is named before any broker is asked

    async def work(cluster: Cluster) -> list[QueryLag]:
        lags = []
        for checkpoint in args.checkpoint:
            with waiting(f"reading the high watermarks for {checkpoint}"):
                lags.append(await query_lag(cluster, checkpoint))
        return lags

    lags = run_with_cluster(args, work)
    if args.json:
        print_json([lag.as_json() for lag in lags])
    else:
        for lag in lags:
            print_lag(lag)
    return 0


def print_lag(lag: QueryLag) -> None:
    """One query's lag as a table titled with its checkpoint, batch and total lag."""
    if lag.batch_id is None:
        print(f"{lag.checkpoint}: no micro-batch committed yet")
        return
    title = f"{lag.checkpoint} (batch {lag.batch_id}, total lag {lag.total_lag})"
    if not lag.partitions:
        print(f"{title}: no replog partitions in its offsets")
        return
    print_table(
        COLUMNS,
        [[p.topic, p.partition, p.committed, p.high_watermark, p.lag] for p in lag.partitions],
        title=title,
        highlight=[p.high_watermark is None or p.behind_the_log for p in lag.partitions],
    )
