"""`replog transactions list|describe|describe-producers`: Kafka transactions, as
kafka-transactions shows them.

Like `replog groups`, these speak Kafka's protocol to the brokers' Kafka listeners, where
the transaction coordinators are (same connection options). `list` asks every broker
(ListTransactions: each coordinator lists the transactional ids it owns; v1 for
kafka-transactions' `--duration-filter`), `describe` the coordinator of one transactional
id (FindCoordinator, then DescribeTransactions), `describe-producers` the leader of one
partition, or the broker `--broker-id` names (DescribeProducers: the producers it knows,
and where each one's open transaction began; any replica answers, as in Kafka).

Tables have kafka-transactions' columns, or with `--json`:
- list: `[{"transactional_id", "coordinator", "producer_id", "state"}, ...]`
- describe: `{"transactional_id", "coordinator", "producer_id", "producer_epoch",
  "state", "timeout_ms", "start_time_ms", "duration_ms", "partitions": [{"topic",
  "partition"}]}`; start time and duration are null while the id has begun no
  transaction (a completed one keeps its start time, as in Kafka).
- describe-producers: `[{"producer_id", "producer_epoch", "latest_coordinator_epoch",
  "last_sequence", "last_timestamp", "current_transaction_start_offset"}, ...]`, by
  producer id; the start offset is null while the producer has no transaction open, and
  the coordinator epoch and last sequence -1 where none is known (as kafka-transactions
  prints them).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from spark_replica.client import listener_probe
from spark_replica.client.kafka_admin import (
    NO_DURATION_FILTER,
    KafkaAdminClient,
    ProducerDescription,
    TransactionDescription,
)
from spark_replica.tools.cli.common import (
    CLIENT_ID,
    add_kafka_listener_options,
    client_security,
    kafka_bootstrap,
    require_listener,
)
from spark_replica.tools.cli.output import add_json_flag, print_json, print_table
from spark_replica.topics import TopicPartition

LIST_COLUMNS = ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
DESCRIBE_COLUMNS = (
    "COORDINATOR-ID",
    "TRANSACTIONAL-ID",
    "PRODUCER-ID",
    "PRODUCER-EPOCH",
    "STATE",
    "TIMEOUT-MS",
    "START-TIME-MS",
    "DURATION-MS",
    "TOPIC-PARTITIONS",
)
# kafka-transactions describe-producers' columns.
PRODUCERS_COLUMNS = (
    "PRODUCER-ID",
    "PRODUCER-EPOCH",
    "LATEST-COORDINATOR-EPOCH",
    "LAST-SEQUENCE",
    "LAST-TIMESTAMP",
    "CURRENT-TRANSACTION-START-OFFSET",
)
# DescribeTransactions' start time of a transactional id with no transaction open.
NO_START_TIME = -1
# DescribeProducers' start offset of a producer with no transaction open.
NO_TXN_START_OFFSET = -1


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    transactions = subparsers.add_parser(
        "transactions", help="list and describe Kafka transactions"
    )
    actions = transactions.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="every transactional id, its producer and state")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help="only transactions in this state, e.g. Ongoing (repeatable)",
    )
    listing.add_argument(
        "--producer-id",
        type=int,
        action="append",
        default=[],
        help="only this producer id (repeatable)",
    )
    listing.add_argument(
        "--duration-filter",
        type=int,
        default=NO_DURATION_FILTER,
        metavar="MS",
        help="only transactions running longer than MS milliseconds (default -1: all)",
    )
    add_json_flag(listing)
    add_kafka_listener_options(listing)

    describe = actions.add_parser(
        "describe", help="one transactional id: producer, state, timeout, open partitions"
    )
    describe.add_argument("--transactional-id", required=True, help="the transactional id")
    add_json_flag(describe)
    add_kafka_listener_options(describe)

    producers = actions.add_parser(
        "describe-producers",
        help="a partition's active producers, as its leader (or --broker-id) knows them, "
        "and where each one's open transaction began",
    )
    producers.add_argument("--topic", required=True, help="the topic")
    producers.add_argument("--partition", type=int, required=True, help="the partition")
    producers.add_argument(
        "--broker-id",
        type=int,
        help="the broker to ask (any replica of the partition answers); default: its leader",
    )
    add_json_flag(producers)
    add_kafka_listener_options(producers)
    transactions.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    bootstrap = kafka_bootstrap(args)
    security = client_security(args)

    async def main() -> int:
        if args.bootstrap:
            await require_listener(bootstrap, listener_probe.KAFKA, args, security)
        async with KafkaAdminClient(bootstrap, security, CLIENT_ID, args.timeout) as admin:
            if args.action == "list":
                return await _list(admin, args)
            if args.action == "describe-producers":
                return await _describe_producers(admin, args)
            return await _describe(admin, args)

    return asyncio.run(main())


async def _list(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    listed = await admin.list_transactions(args.state, args.producer_id, args.duration_filter)
    rows = [[t.transactional_id, t.coordinator, t.producer_id, t.state] for t in listed]
    if args.json:
        print_json(
            [
                {"transactional_id": tid, "coordinator": node, "producer_id": pid, "state": state}
                for tid, node, pid, state in rows
            ]
        )
    elif rows:
        print_table(LIST_COLUMNS, rows)
    return 0


async def _describe(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    described = await admin.describe_transaction(args.transactional_id)
    document = description_json(described, int(time.time() * 1000))
    if args.json:
        print_json(document)
        return 0
    partitions = ",".join(str(tp) for tp in described.partitions)
    row = [
        described.coordinator,
        described.transactional_id,
        described.producer_id,
        described.producer_epoch,
        described.state,
        described.timeout_ms,
        document["start_time_ms"],
        document["duration_ms"],
        partitions,
    ]
    print_table(DESCRIBE_COLUMNS, [row])
    return 0


def description_json(described: TransactionDescription, now_ms: int) -> dict[str, object]:
    """`describe --json`'s document; the duration is reckoned at `now_ms`."""
    started = described.start_time_ms if described.start_time_ms != NO_START_TIME else None
    return {
        "transactional_id": described.transactional_id,
        "coordinator": described.coordinator,
        "producer_id": described.producer_id,
        "producer_epoch": described.producer_epoch,
        "state": described.state,
        "timeout_ms": described.timeout_ms,
        "start_time_ms": started,
        "duration_ms": None if started is None else max(now_ms - started, 0),
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition} for tp in described.partitions
        ],
    }


async def _describe_producers(admin: KafkaAdminClient, args: argparse.Namespace) -> int:
    described = await admin.describe_producers(
        TopicPartition(args.topic, args.partition), args.broker_id
    )
    documents = [producer_json(producer) for producer in described]
    if args.json:
        print_json(documents)
    elif documents:
        print_table(PRODUCERS_COLUMNS, [list(document.values()) for document in documents])
    return 0


def producer_json(producer: ProducerDescription) -> dict[str, object]:
    """One producer of `describe-producers --json`'s list (and a row of its table)."""
    start = producer.current_txn_start_offset
    return {
        "producer_id": producer.producer_id,
        "producer_epoch": producer.producer_epoch,
        "latest_coordinator_epoch": producer.coordinator_epoch,
        "last_sequence": producer.last_sequence,
        "last_timestamp": producer.last_timestamp,
        "current_transaction_start_offset": None if start == NO_TXN_START_OFFSET else start,
    }
