"""CreateTopics, DeleteTopics and CreatePartitions: topic administration through any broker.

CreateTopics request: per topic its name, partition count, replication factor and config
entries (key, value); then timeout_ms. DeleteTopics request: topic names, timeout_ms.
CreatePartitions request: per topic its name and new total partition count; timeout_ms.
All answer per topic an error code and message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer


@dataclass(slots=True)
class NewTopic:
    topic: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TopicResult:
    topic: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class CreateTopicsRequest:
    API_KEY = ApiKey.CREATE_TOPICS
    topics: list[NewTopic]
    timeout_ms: int = 30_000

    def write(self, w: Writer) -> None:
        def write_config(item: tuple[str, str]) -> None:
            w.string(item[0])
            w.string(item[1])

        def write_topic(t: NewTopic) -> None:
            w.string(t.topic)
            w.int32(t.num_partitions)
            w.int16(t.replication_factor)
            w.array(t.configs.items(), write_config)

        w.array(self.topics, write_topic)
        w.int32(self.timeout_ms)

    @classmethod
    def read(cls, r: Reader) -> CreateTopicsRequest:
        def read_config() -> tuple[str, str]:
            return r.required_string(), r.required_string()

        def read_topic() -> NewTopic:
            name, partitions, factor = r.required_string(), r.int32(), r.int16()
            return NewTopic(name, partitions, factor, dict(r.required_array(read_config)))

        topics = r.required_array(read_topic)
        return cls(topics, r.int32())


@dataclass(slots=True)
class DeleteTopicsRequest:
    API_KEY = ApiKey.DELETE_TOPICS
    topics: list[str]
    timeout_ms: int = 30_000

    def write(self, w: Writer) -> None:
        w.array(self.topics, w.string)
        w.int32(self.timeout_ms)

    @classmethod
    def read(cls, r: Reader) -> DeleteTopicsRequest:
        topics = r.required_array(r.required_string)
        return cls(topics, r.int32())


@dataclass(slots=True)
class PartitionCount:
    topic: str
    count: int


@dataclass(slots=True)
class CreatePartitionsRequest:
    API_KEY = ApiKey.CREATE_PARTITIONS
    topics: list[PartitionCount]
    timeout_ms: int = 30_000

    def write(self, w: Writer) -> None:
        def write_topic(t: PartitionCount) -> None:
            w.string(t.topic)
            w.int32(t.count)

        w.array(self.topics, write_topic)
        w.int32(self.timeout_ms)

    @classmethod
    def read(cls, r: Reader) -> CreatePartitionsRequest:
        topics = r.required_array(lambda: PartitionCount(r.required_string(), r.int32()))
        return cls(topics, r.int32())


@dataclass(slots=True)
class TopicResultsResponse:
    """The response of CreateTopics, DeleteTopics and CreatePartitions."""

    topics: list[TopicResult]

    def write(self, w: Writer) -> None:
        def write_result(t: TopicResult) -> None:
            w.string(t.topic)
            w.int16(t.error_code)
            w.string(t.error_message)

        w.array(self.topics, write_result)

    @classmethod
    def read(cls, r: Reader) -> TopicResultsResponse:
        return cls(
            r.required_array(lambda: TopicResult(r.required_string(), r.int16(), r.string()))
        )
