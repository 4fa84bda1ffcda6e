"""The transaction coordinator's settings, with Kafka's names and defaults.

The `transaction.state.log.*` keys shape the internal `__transaction_state` topic as
the `offsets.topic.*` keys shape `__consumer_offsets`: its partitions (a transactional
id's coordinator is the leader of one of them, so their count must never change once
the topic exists), its copies and the in-sync copies an append of a transaction's state
waits for, its segment size, and how much of it a load reads at a time. The others bound
what producers may ask and how the coordinator tidies up: the longest timeout a producer
may set, how long an idle transactional id is kept, and how often open transactions past
their timeout are aborted and idle ids expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from spark_replica.errors import ConfigError

# Kafka key -> TransactionConfig field
_FIELDS = {
    "transaction.state.log.num.partitions": "state_log_num_partitions",
    "transaction.state.log.replication.factor": "state_log_replication_factor",
    "transaction.state.log.min.isr": "state_log_min_isr",
    "transaction.state.log.segment.bytes": "state_log_segment_bytes",
    "transaction.state.log.load.buffer.size": "state_log_load_buffer_size",
    "transaction.max.timeout.ms": "max_timeout_ms",
    "transactional.id.expiration.ms": "transactional_id_expiration_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "abort_timed_out_interval_ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "remove_expired_interval_ms",
}
KEYS = tuple(_FIELDS)
_KEY_OF = {field: key for key, field in _FIELDS.items()}


@dataclass(frozen=True)
class TransactionConfig:
    state_log_num_partitions: int = 50
    state_log_replication_factor: int = 3
    state_log_min_isr: int = 2
    state_log_segment_bytes: int = 104_857_600
    state_log_load_buffer_size: int = 5_242_880
    max_timeout_ms: int = 900_000  # 15 minutes
    transactional_id_expiration_ms: int = 604_800_000  # 7 days
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value <= 0:
                raise ConfigError(
                    f"broker config {_KEY_OF[field.name]} must be positive, not {value}"
                )
        if self.state_log_min_isr > self.state_log_replication_factor:
            raise ConfigError(
                f"transaction.state.log.min.isr={self.state_log_min_isr} is over "
                f"transaction.state.log.replication.factor={self.state_log_replication_factor}: "
                "no transaction could ever be stored"
            )

    def with_settings(self, settings: Mapping[str, str]) -> TransactionConfig:
        """Apply `transaction.*` settings (keys in KEYS), each an integer."""
        values: dict[str, Any] = {}
        for key, raw in settings.items():
            field = _FIELDS.get(key)
            if field is None:
                raise ConfigError(f"unknown transaction config {key!r}")
            try:
                values[field] = int(raw.strip())
            except ValueError:
                raise ConfigError(f"broker config {key}={raw!r}: not an integer") from None
        return replace(self, **values)
