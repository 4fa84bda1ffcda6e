"""The group APIs of the Kafka listener, by api key."""

from __future__ import annotations

from brokerd.kafka.request import KafkaHandler

GROUP_HANDLERS: dict[int, KafkaHandler] = {}
