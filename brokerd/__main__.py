"""`python -m brokerd --broker-id N --port P [--kafka-port K] --log-dir D --zookeeper CONNECT
[--config FILE]`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from brokerd.broker import Broker
from brokerd.config import BrokerConfig
from spark_replica.errors import ReplogError
from spark_replica.security.settings import load_properties
from spark_replica.topic_config import parse_assignments


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="brokerd", description="a replog broker")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--port", type=int, default=9092, help="0 picks a free port")
    parser.add_argument(
        "--kafka-port",
        type=int,
        default=-1,
        help="the Kafka-protocol listener's port: 0 picks a free port, -1 (default) turns it off",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=-1,
        help="serve Prometheus metrics over HTTP on this port: 0 picks a free port, "
        "-1 (default) turns it off",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--zookeeper", required=True, help="host:port[,host:port][/chroot]")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a properties file of broker configs (secrets go here, not on the command line); "
        "--override wins over it",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config such as log.segment.bytes=1048576 (repeatable)",
    )
    return parser


def _settings(config_file: Path | None, overrides: list[str]) -> dict[str, str]:
    settings = {} if config_file is None else load_properties(config_file)
    return settings | parse_assignments(overrides)


def run_broker(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig(
            broker_id=args.broker_id,
            log_dir=args.log_dir.resolve(),
            zookeeper=args.zookeeper,
            host=args.host,
            port=args.port,
            kafka_port=args.kafka_port,
            metrics_port=args.metrics_port,
        ).with_overrides(_settings(args.config, args.override))
    except ReplogError as exc:
        print(f"brokerd: {exc}", file=sys.stderr)
        return 2
    config.log_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=config.log_file,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(Broker(config).run())
    except ReplogError as exc:
        logging.getLogger("brokerd").error("broker failed: %s", exc)
        print(f"brokerd: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_broker(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
