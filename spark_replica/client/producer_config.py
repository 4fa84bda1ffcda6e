"""How a producer sends: ProducerConfig, Kafka's producer settings with their checks.

Kept apart from producer.py so that the per-partition senders, which read the settings,
do not import the Producer that owns them.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.errors import ConfigError
from spark_replica.records import parse_compression
from spark_replica.wire.native.produce import ACKS_ALL, ACKS_LEADER, ACKS_NONE

from .in_flight import MAX_IDEMPOTENT_IN_FLIGHT
from .retry import RetryPolicy

ACKS_BY_NAME = {"0": ACKS_NONE, "1": ACKS_LEADER, "all": ACKS_ALL, "-1": ACKS_ALL}
DEFAULT_BUFFER_MEMORY = 32 * 1024 * 1024  # Kafka's buffer.memory default


def parse_acks(value: str | int) -> int:
    acks = ACKS_BY_NAME.get(str(value).strip().lower())
    if acks is None:
        raise ConfigError(f"acks={value!r}: use 0, 1 or all")
    return acks


@dataclass(frozen=True)
class ProducerConfig:
    """How a Producer sends; the defaults neither lose, duplicate nor reorder records.

    As Kafka's producers since 3.0: acks=all and idempotence, with up to 5 batches in
    flight per partition whose retries keep their order. A caller who wants acks=1 or
    acks=0 says so, and then gets no idempotence unless it asks for it (it cannot:
    idempotence needs acks=all). `batch_size`, `linger_ms`, `buffer_memory` and
    `max_block_ms` mean what Kafka's batch.size, linger.ms, buffer.memory and
    max.block.ms mean; `batch_size` defaults larger than Kafka's 16 KiB because an
    Arrow batch's fixed cost (schema, header) wants more records per batch.
    """

    acks: int = ACKS_ALL
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000  # Kafka's retry.backoff.max.ms
    batch_records: int = 10_000
    # Estimated uncompressed payload bytes per batch; well below the broker's 16 MiB limit.
    batch_size: int = 1_000_000
    linger_ms: int = 5
    compression: str = "none"
    # Kafka's max.in.flight.requests.per.connection, per partition here.
    max_in_flight_per_partition: int = 5
    # None: idempotent exactly when acks=all (so by default), as Kafka's producers.
    enable_idempotence: bool | None = None
    # Bytes of records sent and not yet answered; a send waits for room beyond it.
    buffer_memory: int = DEFAULT_BUFFER_MEMORY
    # How long a send waits for room in buffer_memory (or for metadata) before failing.
    max_block_ms: int = 60_000
    # Kafka's transactional.id: set only by a TransactionalProducer, whose batches it flags.
    transactional_id: str | None = None
    # Kafka's transaction.timeout.ms: the coordinator aborts a transaction open longer.
    transaction_timeout_ms: int = 60_000

    @property
    def retry_policy(self) -> RetryPolicy:
        """Kafka's rule: a retry.backoff.ms above the maximum is the maximum, constant."""
        backoff_ms = min(self.retry_backoff_ms, self.retry_backoff_max_ms)
        return RetryPolicy(backoff_ms / 1000, self.retry_backoff_max_ms / 1000)

    @property
    def idempotent(self) -> bool:
        if self.enable_idempotence is None:
            return self.acks == ACKS_ALL
        return self.enable_idempotence

    def __post_init__(self) -> None:
        if self.enable_idempotence and self.acks != ACKS_ALL:
            raise ConfigError("enable_idempotence needs acks=all")
        if self.acks not in (ACKS_NONE, ACKS_LEADER, ACKS_ALL):
            raise ConfigError(f"acks={self.acks}: use 0, 1 or -1 (all)")
        positive = (
            "request_timeout_ms",
            "delivery_timeout_ms",
            "batch_records",
            "batch_size",
            "max_in_flight_per_partition",
            "buffer_memory",
            "transaction_timeout_ms",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("retry_backoff_ms", "retry_backoff_max_ms", "linger_ms", "max_block_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, not {getattr(self, name)}")
        if self.idempotent and self.max_in_flight_per_partition > MAX_IDEMPOTENT_IN_FLIGHT:
            raise ConfigError(
                f"max_in_flight_per_partition={self.max_in_flight_per_partition}: an "
                f"idempotent producer allows at most {MAX_IDEMPOTENT_IN_FLIGHT}"
            )
        if self.transactional_id is not None and not self.idempotent:
            raise ConfigError("a transactional producer is idempotent: it needs acks=all")
        if self.transactional_id == "":
            raise ConfigError("transactional_id must not be empty")
        object.__setattr__(self, "compression", parse_compression(self.compression))
