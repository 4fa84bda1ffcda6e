"""The API keys replog speaks and the versions of each that this build supports.

Numbers follow Kafka's so that a packet capture reads familiarly; layouts are replog's
own (see each message module). Keys from 1000 up are replog's own APIs, which Kafka has
no counterpart of, numbered far from Kafka's so that no Kafka API will ever take them.
A version added here is one its tables hold (a test checks it); clients send the highest
version their broker also serves (spark_replica/wire/native/negotiation.py).
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    CONTROLLED_SHUTDOWN = 7
    UPDATE_METADATA = 6
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSETS_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    # replog's own, from 1000 up
    REGISTER_SINK_PARTICIPANTS = 1000


# api key -> (min version, max version) this build serves
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 1),
    ApiKey.FETCH: (0, 1),
    ApiKey.LIST_OFFSETS: (0, 1),
    ApiKey.METADATA: (0, 0),
    ApiKey.API_VERSIONS: (0, 0),
    ApiKey.CREATE_TOPICS: (0, 0),
    ApiKey.DELETE_TOPICS: (0, 0),
    ApiKey.DELETE_RECORDS: (0, 0),
    ApiKey.LEADER_AND_ISR: (0, 0),
    ApiKey.UPDATE_METADATA: (0, 0),
    ApiKey.OFFSETS_FOR_LEADER_EPOCH: (0, 0),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.STOP_REPLICA: (0, 0),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 0),
    ApiKey.CREATE_PARTITIONS: (0, 0),
    ApiKey.SASL_HANDSHAKE: (0, 0),
    ApiKey.SASL_AUTHENTICATE: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 0),
    ApiKey.CREATE_ACLS: (0, 0),
    ApiKey.DELETE_ACLS: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (0, 0),
    ApiKey.FIND_COORDINATOR: (0, 0),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 0),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 0),
    ApiKey.END_TXN: (0, 0),
    ApiKey.TXN_OFFSET_COMMIT: (0, 0),
    ApiKey.REGISTER_SINK_PARTICIPANTS: (0, 0),
}


def is_supported(api_key: int, api_version: int) -> bool:
    try:
        versions = SUPPORTED_VERSIONS.get(ApiKey(api_key))
    except ValueError:
        return False
    return versions is not None and versions[0] <= api_version <= versions[1]
