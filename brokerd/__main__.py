"""`python -m brokerd [--config server.properties] [--broker-id N --port P --log-dir D
--zookeeper CONNECT ...]`.

Settings come from three places, each winning over the next: flags (`--broker-id`,
`--port`, ... and `--override key=value`), the properties file given with `--config`
(Kafka's server.properties names; see brokerd.config.server_properties), and the defaults. The
identity flags are needed only where the file does not give them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TypeVar

from brokerd.broker import Broker
from brokerd.config.broker import BrokerConfig
from brokerd.config.server_properties import parse_server_properties
from brokerd.logging_setup import (
    DEFAULT_BACKUP_COUNT,
    DEFAULT_LEVEL,
    DEFAULT_MAX_BYTES,
    LogSettings,
    configure_broker_logging,
)
from spark_replica import event_loop
from spark_replica.errors import ConfigError, ReplogError
from spark_replica.event_loop import ENVIRONMENT_VARIABLE as EVENT_LOOP_ENV
from spark_replica.event_loop import EVENT_LOOPS
from spark_replica.security.settings import load_properties
from spark_replica.topic_config import parse_assignments

# The command the broker's usage line names: `replog broker run` execs `python -m brokerd`
# and sets this, since the module cannot tell from its argv how it was started.
PROG_ENV = "REPLOG_BROKER_PROG"
DEFAULT_PORT = 9092
DEFAULT_HOST = "127.0.0.1"
OFF = -1

T = TypeVar("T")

log = logging.getLogger("brokerd")


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        prog=os.environ.get(PROG_ENV, "brokerd"), description="a replog broker"
    )
    parser.add_argument(
        "--broker-id", type=int, help="the broker's id (required unless --config gives broker.id)"
    )
    parser.add_argument(
        "--port",
        type=int,
        help="the replog listener's port, 0 picks a free port (default 9092, or the REPLOG "
        "listener in --config)",
    )
    parser.add_argument(
        "--kafka-port",
        type=int,
        help="the Kafka-protocol listener's port: 0 picks a free port, -1 turns it off "
        "(default -1, or the KAFKA listener in --config)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus metrics over HTTP on this port: 0 picks a free port, "
        "-1 turns it off (default -1, or metrics.port in --config)",
    )
    parser.add_argument(
        "--host",
        help="the address every listener binds, e.g. 0.0.0.0 for all interfaces (default "
        "127.0.0.1, or each listener's host in --config)",
    )
    parser.add_argument(
        "--advertised-host",
        metavar="HOST",
        help="register every listener at HOST with its bound port: the address clients and "
        "other brokers connect to (default: advertised.listeners in --config, else as bound; "
        "a broker bound to 0.0.0.0 registers this machine's address)",
    )
    parser.add_argument(
        "--log-dir", type=Path, help="the data directory (required unless --config gives log.dirs)"
    )
    parser.add_argument(
        "--zookeeper",
        metavar="CONNECT",
        help="host:port[,host:port][/chroot] (required unless --config gives zookeeper.connect)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a server.properties file in Kafka's names (secrets go here, not on the command "
        "line); flags and --override win over it (default: none)",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config such as log.segment.bytes=1048576, as in --config "
        "(repeatable; default: none)",
    )
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        help=f"the broker log's level: DEBUG, INFO, WARN, ERROR (default {DEFAULT_LEVEL}, "
        "or broker.log.level in --config)",
    )
    parser.add_argument(
        "--logger",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="one logger's level, e.g. brokerd.controller=DEBUG (repeatable; also "
        "broker.log.logger.NAME in --config; default: none)",
    )
    parser.add_argument(
        "--log-max-bytes",
        metavar="BYTES",
        help=f"rotate broker.log when it reaches this size (default {DEFAULT_MAX_BYTES}, "
        "or broker.log.max.bytes in --config)",
    )
    parser.add_argument(
        "--log-backup-count",
        metavar="N",
        help=f"rotated files kept: broker.log.1 to .N (default {DEFAULT_BACKUP_COUNT}, "
        "or broker.log.backup.count in --config)",
    )
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        help=f"the asyncio event loop to run on (default {EVENT_LOOP_ENV} in the "
        "environment, else uvloop when the listener uses TLS, where it is faster, and "
        "asyncio's otherwise)",
    )
    return parser


def resolve(args: argparse.Namespace) -> tuple[BrokerConfig, LogSettings, tuple[str, ...]]:
    """The broker's config, its log settings and the file's ignored Kafka keys."""
    settings = {} if args.config is None else load_properties(args.config)
    file = parse_server_properties(settings | parse_assignments(args.override))
    kafka_port = _first(args.kafka_port, file.kafka_port, OFF)
    config = BrokerConfig(
        broker_id=_required(args.broker_id, file.broker_id, "--broker-id", "broker.id"),
        log_dir=_required(args.log_dir, file.log_dir, "--log-dir", "log.dirs").resolve(),
        zookeeper=_required(args.zookeeper, file.zookeeper, "--zookeeper", "zookeeper.connect"),
        host=_first(args.host, file.host, DEFAULT_HOST),
        port=_replog_port(args.port, file.port, kafka_port),
        kafka_host=_first(args.host, file.kafka_host, DEFAULT_HOST),
        kafka_port=kafka_port,
        metrics_host=_first(args.host, file.metrics_host, DEFAULT_HOST),
        metrics_port=_first(args.metrics_port, file.metrics_port, OFF),
        advertised_listeners={} if args.advertised_host else file.advertised_listeners,
        advertised_host=args.advertised_host,
    ).with_overrides(file.broker_configs)
    log_settings = LogSettings().with_properties(file.log_settings)
    log_settings = log_settings.with_flags(
        args.log_max_bytes, args.log_backup_count, args.log_level, args.logger
    )
    return config, log_settings, file.ignored


def _first(flag: T | None, from_file: T | None, default: T) -> T:
    if flag is not None:
        return flag
    return default if from_file is None else from_file


def _required(flag: T | None, from_file: T | None, option: str, key: str) -> T:
    value = flag if flag is not None else from_file
    if value is None:
        raise ConfigError(f"give {option}, or {key} in the --config file")
    return value


def _replog_port(flag: int | None, from_file: int | None, kafka_port: int) -> int:
    """A Kafka listener on 9092 (Kafka's own default, as in `PLAINTEXT://:9092`) leaves
    the replog listener no default port: say so rather than fail to bind."""
    if flag is None and from_file is None and kafka_port == DEFAULT_PORT:
        raise ConfigError(
            f"listeners puts the Kafka listener on {DEFAULT_PORT}, replog's default port: add "
            "REPLOG://host:port (replog's own protocol, for its client and Spark) or give --port"
        )
    return _first(flag, from_file, DEFAULT_PORT)


def run_broker(args: argparse.Namespace) -> int:
    try:
        config, log_settings, ignored = resolve(args)
        loop = event_loop.chosen(
            args.event_loop, event_loop.broker_default(config.security.uses_tls)
        )
        config.log_dir.mkdir(parents=True, exist_ok=True)
        configure_broker_logging(log_settings, config.log_file, config.broker_id)
    except (ReplogError, OSError) as exc:
        print(f"brokerd: {exc}", file=sys.stderr)
        return 2
    for key in ignored:
        log.warning("%s is a Kafka broker config that replog does not use; ignored", key)
    log.info("running on the %s event loop", loop)
    try:
        event_loop.run(Broker(config).run(), loop)
    except ReplogError as exc:
        log.error("broker failed: %s", exc)
        print(f"brokerd: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_broker(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
