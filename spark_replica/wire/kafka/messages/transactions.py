"""Tables of the transaction APIs, transcribed from Kafka's message definitions.

Versions are the ones before KIP-890's second part (an epoch bump at every transaction,
TRANSACTION_ABORTABLE), which clients reach only when a broker offers them:
AddPartitionsToTxn 0-3 (4 and later batch several transactions and are sent by brokers
only), AddOffsetsToTxn 0-3, EndTxn 0-3, TxnOffsetCommit 0-3, WriteTxnMarkers 0-1,
DescribeTransactions 0, ListTransactions 0-1 (1 adds the duration filter),
DescribeProducers 0 (a partition leader's producers, for kafka-transactions'
describe-producers and find-hanging).
"""

from __future__ import annotations

from spark_replica.wire.kafka.messages.layouts import (
    api,
    error_code,
    error_message,
    head,
    per_topic,
    throttle,
)
from spark_replica.wire.schema import Field


def _producer(versions: str = "0+") -> list[Field]:
    """The producer id and epoch a transactional request speaks for."""
    return [Field("ProducerId", "int64", versions), Field("ProducerEpoch", "int16", versions)]


def _topic_partitions(array: str) -> Field:
    """An array `array` of topics, each with its partitions as an array of int32."""
    return Field(
        array, [Field("Name", "string", "0+"), Field("PartitionIndexes", "[]int32", "0+")], "0+"
    )


ADD_PARTITIONS_TO_TXN_REQUEST, ADD_PARTITIONS_TO_TXN_RESPONSE = api(
    "AddPartitionsToTxn",
    api_key=24,
    versions=(0, 3),
    flexible=3,
    request=[
        Field("V3AndBelowTransactionalId", "string", "0-3"),
        Field("V3AndBelowProducerId", "int64", "0-3"),
        Field("V3AndBelowProducerEpoch", "int16", "0-3"),
        Field(
            "V3AndBelowTopics",
            [Field("Name", "string", "0+"), Field("Partitions", "[]int32", "0+")],
            "0-3",
        ),
    ],
    response=[
        throttle(),
        Field(
            "ResultsByTopicV3AndBelow",
            [
                Field("Name", "string", "0+"),
                Field(
                    "ResultsByPartition",
                    [
                        Field("PartitionIndex", "int32", "0+"),
                        Field("PartitionErrorCode", "int16", "0+"),
                    ],
                    "0+",
                ),
            ],
            "0-3",
        ),
    ],
)

ADD_OFFSETS_TO_TXN_REQUEST, ADD_OFFSETS_TO_TXN_RESPONSE = api(
    "AddOffsetsToTxn",
    api_key=25,
    versions=(0, 3),
    flexible=3,
    request=[
        Field("TransactionalId", "string", "0+"),
        *_producer(),
        Field("GroupId", "string", "0+"),
    ],
    response=head("0+"),
)

END_TXN_REQUEST, END_TXN_RESPONSE = api(
    "EndTxn",
    api_key=26,
    versions=(0, 3),
    flexible=3,
    request=[
        Field("TransactionalId", "string", "0+"),
        *_producer(),
        Field("Committed", "bool", "0+"),
    ],
    response=head("0+"),
)

WRITE_TXN_MARKERS_REQUEST, WRITE_TXN_MARKERS_RESPONSE = api(
    "WriteTxnMarkers",
    api_key=27,
    versions=(0, 1),
    flexible=1,
    request=[
        Field(
            "Markers",
            [
                *_producer(),
                Field("TransactionResult", "bool", "0+"),
                _topic_partitions("Topics"),
                Field("CoordinatorEpoch", "int32", "0+"),
            ],
            "0+",
        ),
    ],
    response=[
        Field(
            "Markers",
            [
                Field("ProducerId", "int64", "0+"),
                per_topic(Field("PartitionIndex", "int32", "0+"), error_code()),
            ],
            "0+",
        ),
    ],
)

TXN_OFFSET_COMMIT_REQUEST, TXN_OFFSET_COMMIT_RESPONSE = api(
    "TxnOffsetCommit",
    api_key=28,
    versions=(0, 3),
    flexible=3,
    request=[
        Field("TransactionalId", "string", "0+"),
        Field("GroupId", "string", "0+"),
        *_producer(),
        Field("GenerationId", "int32", "3+", default=-1),
        Field("MemberId", "string", "3+", default=""),
        Field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            Field("CommittedOffset", "int64", "0+"),
            Field("CommittedLeaderEpoch", "int32", "2+", default=-1),
            Field("CommittedMetadata", "string", "0+", nullable="0+"),
        ),
    ],
    response=[
        throttle(),
        per_topic(Field("PartitionIndex", "int32", "0+"), error_code()),
    ],
)

DESCRIBE_TRANSACTIONS_REQUEST, DESCRIBE_TRANSACTIONS_RESPONSE = api(
    "DescribeTransactions",
    api_key=65,
    versions=(0, 0),
    flexible=0,
    request=[Field("TransactionalIds", "[]string", "0+")],
    response=[
        throttle(),
        Field(
            "TransactionStates",
            [
                error_code(),
                Field("TransactionalId", "string", "0+"),
                Field("TransactionState", "string", "0+"),
                Field("TransactionTimeoutMs", "int32", "0+"),
                Field("TransactionStartTimeMs", "int64", "0+"),
                Field("ProducerId", "int64", "0+"),
                Field("ProducerEpoch", "int16", "0+"),
                _topic_partitions("TopicPartitions"),
            ],
            "0+",
        ),
    ],
)

LIST_TRANSACTIONS_REQUEST, LIST_TRANSACTIONS_RESPONSE = api(
    "ListTransactions",
    api_key=66,
    versions=(0, 1),
    flexible=0,
    request=[
        Field("StateFilters", "[]string", "0+"),
        Field("ProducerIdFilters", "[]int64", "0+"),
        Field("DurationFilter", "int64", "1+", default=-1),
    ],
    response=[
        *head("0+"),
        Field("UnknownStateFilters", "[]string", "0+"),
        Field(
            "TransactionStates",
            [
                Field("TransactionalId", "string", "0+"),
                Field("ProducerId", "int64", "0+"),
                Field("TransactionState", "string", "0+"),
            ],
            "0+",
        ),
    ],
)

DESCRIBE_PRODUCERS_REQUEST, DESCRIBE_PRODUCERS_RESPONSE = api(
    "DescribeProducers",
    api_key=61,
    versions=(0, 0),
    flexible=0,
    request=[_topic_partitions("Topics")],
    response=[
        throttle(),
        per_topic(
            Field("PartitionIndex", "int32", "0+"),
            error_code(),
            error_message(),
            Field(
                "ActiveProducers",
                [
                    Field("ProducerId", "int64", "0+"),
                    # An int32 here, unlike everywhere else in Kafka's protocol.
                    Field("ProducerEpoch", "int32", "0+"),
                    Field("LastSequence", "int32", "0+", default=-1),
                    Field("LastTimestamp", "int64", "0+", default=-1),
                    Field("CoordinatorEpoch", "int32", "0+"),
                    Field("CurrentTxnStartOffset", "int64", "0+", default=-1),
                ],
                "0+",
            ),
        ),
    ],
)

REQUESTS = [
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_OFFSETS_TO_TXN_REQUEST,
    END_TXN_REQUEST,
    WRITE_TXN_MARKERS_REQUEST,
    TXN_OFFSET_COMMIT_REQUEST,
    DESCRIBE_TRANSACTIONS_REQUEST,
    LIST_TRANSACTIONS_REQUEST,
    DESCRIBE_PRODUCERS_REQUEST,
]
RESPONSES = [
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    ADD_OFFSETS_TO_TXN_RESPONSE,
    END_TXN_RESPONSE,
    WRITE_TXN_MARKERS_RESPONSE,
    TXN_OFFSET_COMMIT_RESPONSE,
    DESCRIBE_TRANSACTIONS_RESPONSE,
    LIST_TRANSACTIONS_RESPONSE,
    DESCRIBE_PRODUCERS_RESPONSE,
]
