"""Kafka's DescribeConfigs: a topic's effective settings, and a few of the broker's.

A topic's answer is every topic config replog understands: the value set on the topic
in ZooKeeper (source DYNAMIC_TOPIC_CONFIG), else the broker's default (DEFAULT_CONFIG),
so that tools show what actually applies. A broker's answer lists a few of its static
settings, read-only. Changing configs is `replog configs alter`'s: AlterConfigs is not
served on this listener.
"""

from __future__ import annotations

import asyncio

from brokerd.config.broker import TOPIC_LOG_FIELDS
from brokerd.core.authorization import (
    authorize_cluster,
    authorize_topic,
    cluster_denied,
    topic_denied,
)
from brokerd.core.context import BrokerContext
from brokerd.core.partitions import SERVING_ERRORS, set_error
from brokerd.kafka.request import KafkaRequest
from spark_replica.errors import (
    ConfigError,
    InvalidRequestError,
    ReplogError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from spark_replica.security.acl import Operation
from spark_replica.topics import validate_topic_name
from spark_replica.wire.schema import Data
from spark_replica.zk import topic_store

TOPIC = 2
BROKER = 4
# Kafka's config sources.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# What a flush setting without a limit is written as (Kafka's Long.MAX_VALUE).
NO_LIMIT = str(2**63 - 1)


def _entry(name: str, value: str, source: int, read_only: bool) -> Data:
    return Data(
        name=name,
        value=value,
        read_only=read_only,
        is_default=source == DEFAULT_CONFIG,
        config_source=source,
        is_sensitive=False,
        synonyms=[],
        config_type=0,
        documentation=None,
    )


def topic_configs(ctx: BrokerContext, overrides: dict[str, str]) -> list[Data]:
    """Every topic config, set or defaulted (pure: the overrides are already read)."""
    config = ctx.config
    log_config = config.log_config_for(overrides)
    values: dict[str, str] = {}
    for name, attr in TOPIC_LOG_FIELDS.items():
        value = getattr(log_config, attr)
        values[name] = NO_LIMIT if value is None else str(value)
    values["min.insync.replicas"] = str(config.min_insync_for(overrides))
    values["compression.type"] = config.compression_type_for(overrides)
    values["unclean.leader.election.enable"] = overrides.get(
        "unclean.leader.election.enable", "false"
    )
    return [
        _entry(
            name,
            value,
            DYNAMIC_TOPIC_CONFIG if name in overrides else DEFAULT_CONFIG,
            read_only=False,
        )
        for name, value in sorted(values.items())
    ]


def broker_configs(ctx: BrokerContext) -> list[Data]:
    config = ctx.config
    values = {
        "broker.id": str(config.broker_id),
        "compression.type": config.compression_type,
        "min.insync.replicas": str(config.min_insync_replicas),
        "log.retention.ms": str(config.log_defaults.retention_ms),
        "log.segment.bytes": str(config.log_defaults.segment_bytes),
        "auto.create.topics.enable": "false",
    }
    return [
        _entry(name, value, STATIC_BROKER_CONFIG, read_only=True)
        for name, value in sorted(values.items())
    ]


async def _read_topic_config(ctx: BrokerContext, topic: str) -> dict[str, str]:
    zk = ctx.zk
    if zk is None:
        raise UnknownServerError("the broker has no ZooKeeper session")

    def read() -> dict[str, str]:
        if topic_store.read_assignment(zk, topic) is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return topic_store.read_topic_config(zk, topic)

    return await asyncio.to_thread(read)


async def handle_describe_configs(ctx: BrokerContext, request: KafkaRequest) -> Data:
    results = []
    for resource in request.body.resources:
        result = Data(
            error_code=0,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        results.append(result)
        try:
            configs = await _describe(ctx, request, resource)
        except (*SERVING_ERRORS, ReplogError, ConfigError) as exc:
            set_error(result, exc)
            continue
        keys = resource.configuration_keys
        result.configs = [c for c in configs if keys is None or c.name in keys]
    return Data(throttle_time_ms=0, results=results)


async def _describe(ctx: BrokerContext, request: KafkaRequest, resource: Data) -> list[Data]:
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        if not authorize_topic(ctx, request, Operation.DESCRIBE_CONFIGS, name):
            raise topic_denied(request, Operation.DESCRIBE_CONFIGS, name)
        validate_topic_name(name)
        return topic_configs(ctx, await _read_topic_config(ctx, name))
    if resource.resource_type == BROKER:
        if not authorize_cluster(ctx, request, Operation.DESCRIBE_CONFIGS):
            raise cluster_denied(request, Operation.DESCRIBE_CONFIGS)
        if name not in ("", str(ctx.config.broker_id)):
            raise InvalidRequestError(
                f"broker {name} is not this broker ({ctx.config.broker_id}): ask it directly"
            )
        return broker_configs(ctx)
    raise InvalidRequestError(
        f"resource type {resource.resource_type}: only topics (2) and brokers (4) have configs"
    )
