"""`replog console`: a read-only web page of the cluster, served until Ctrl-C.

Brokers (alive, controller), topics and partitions (leader, ISR, HW, under-replicated),
produce/consume rates from the brokers' metrics, and the lag of Spark queries given by
their checkpoints. The metrics ports are read from the brokers' ZooKeeper registrations,
so with only --bootstrap the page shows everything but the rates. Brokers whose metrics
need HTTPS and a login are scraped with `metrics.ssl.truststore.location`,
`metrics.basic.auth.username` and `metrics.basic.auth.password` from --command-config.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

from kazoo.client import KazooClient

from spark_replica.errors import ConfigError
from spark_replica.tools.cli.common import (
    add_connection_options,
    client_properties,
    open_cluster,
    zookeeper_session,
)
from spark_replica.tools.console.app import DEFAULT_INTERVAL_S, Console
from spark_replica.tools.console.cluster_source import ClusterSource
from spark_replica.tools.console.scrape import ScrapeSettings
from spark_replica.tools.console.server import ConsoleServer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "console", help="serve a read-only web console of the cluster", description=__doc__
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to serve the page on (default {DEFAULT_HOST}: this machine only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to serve the page on; 0 picks a free one (default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the page may be reached by besides localhost, IP addresses and "
        "--host; repeatable (default: none). Requests naming any other host are refused, "
        "so that a web page elsewhere cannot read the console through DNS rebinding",
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a Spark query's checkpoint directory whose lag to show; repeatable (default: none)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
        help=f"how often to read the cluster and scrape metrics (default {DEFAULT_INTERVAL_S:g})",
    )
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536:
        raise ConfigError(f"--port {args.port} is not a port (0 to 65535)")
    if not args.interval > 0:
        raise ConfigError(f"--interval {args.interval} must be more than 0 seconds")
    with contextlib.ExitStack() as stack:
        zk = None if args.bootstrap else stack.enter_context(zookeeper_session(args, "metrics"))
        asyncio.run(_serve(args, zk))
    return 0


async def _serve(args: argparse.Namespace, zk: KazooClient | None) -> None:
    cluster = open_cluster(args)
    source = ClusterSource(cluster, zk)
    try:
        scrape = ScrapeSettings.from_properties(client_properties(args))
        console = Console(source, args.checkpoint, args.interval, scrape)
        try:
            server = await ConsoleServer(console, args.allow_host).start(args.host, args.port)
        except OSError as exc:
            where = f"{args.host}:{args.port}"
            raise ConfigError(
                f"cannot serve the console on {where}: {exc.strerror or exc}"
            ) from exc
        async with server:
            host, port = server.sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"replog console serving http://{shown}:{port}/ (Ctrl-C to stop)", flush=True)
            stopped = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stopped.set)
            refresh = asyncio.create_task(console.run())
            try:
                await _until(stopped, refresh)
            finally:
                refresh.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresh
                loop.remove_signal_handler(signal.SIGTERM)
    finally:
        source.close()
        await cluster.close()


async def _until(stopped: asyncio.Event, refresh: asyncio.Task[None]) -> None:
    """Until SIGTERM; a refresh loop that fails ends the console with its error."""
    waiter = asyncio.create_task(stopped.wait())
    try:
        await asyncio.wait({waiter, refresh}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if refresh.done():
        refresh.result()
