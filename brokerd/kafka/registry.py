"""The Kafka listener's API registry: its data, admin and ACL handlers by api key (the group
APIs are added bound to the coordinator, brokerd/kafka/groups.py)."""

from __future__ import annotations

from brokerd.kafka.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from brokerd.kafka.describe_configs import handle_describe_configs
from brokerd.kafka.fetch import handle_fetch
from brokerd.kafka.metadata import handle_metadata
from brokerd.kafka.offsets import handle_list_offsets, handle_offset_for_leader_epoch
from brokerd.kafka.produce import handle_produce
from brokerd.kafka.producer_id import handle_init_producer_id
from brokerd.kafka.request import KafkaHandler
from brokerd.kafka.topic_admin import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)

DATA_HANDLERS: dict[int, KafkaHandler] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    19: handle_create_topics,
    20: handle_delete_topics,
    22: handle_init_producer_id,
    23: handle_offset_for_leader_epoch,
    29: handle_describe_acls,
    30: handle_create_acls,
    31: handle_delete_acls,
    32: handle_describe_configs,
    37: handle_create_partitions,
}
