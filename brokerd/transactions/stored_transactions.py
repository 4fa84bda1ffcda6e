"""What one partition of `__transaction_state` says about its transactional ids, replayed
in log order: pure.

Fed the (key, value) pairs of the partition's records oldest first, it keeps what the
last record for each id says, as compaction will (a null value removes the id). The
coordinator builds it when it becomes the partition's leader, then owns it: each entry
is the id's live state, changed only once an append of the change committed (and
marked pending while one is in flight), so requests are answered from memory.

A record that does not decode, or that holds a state no record may hold (Dead, the
epoch fence), is skipped and counted rather than failing the load: one damaged record
must not leave every id of the partition without a coordinator for good.

An id a Spark sink's transactions use is stored in replog's own value version (its
participants and micro-batches: spark_replica.wire.kafka.transaction_records), every
other id in Kafka's version 0; a load reads either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from brokerd.transactions.states import (
    STORABLE,
    Participant,
    TransactionEntry,
    TransactionMetadata,
    TxnState,
)
from spark_replica.errors import ProtocolError
from spark_replica.wire.kafka.transaction_records import (
    SINK_VALUE_VERSION,
    VALUE_VERSION,
    SinkParticipant,
    SinkTransaction,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

Record = tuple[bytes, bytes | None]


def record_of(metadata: TransactionMetadata) -> Record:
    """The record storing `metadata`: a tombstone for an id that is Dead (expired)."""
    key = encode_key(metadata.transactional_id)
    if metadata.state is TxnState.DEAD:
        return key, None
    empty = metadata.state is TxnState.EMPTY
    value = TransactionLogValue(
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        timeout_ms=metadata.timeout_ms,
        status=metadata.state.value,
        partitions=None if empty else tuple(sorted(metadata.partitions)),
        last_update_timestamp_ms=metadata.last_update_timestamp_ms,
        start_timestamp_ms=metadata.start_timestamp_ms,
        sink=_sink_of(metadata),
    )
    return key, encode_value(value, SINK_VALUE_VERSION if metadata.is_sink else VALUE_VERSION)


def _sink_of(metadata: TransactionMetadata) -> SinkTransaction | None:
    if not metadata.is_sink:
        return None
    participants = tuple(
        SinkParticipant(p.tp, p.producer_id, p.producer_epoch)
        for p in sorted(metadata.participants)
    )
    return SinkTransaction(metadata.micro_batch, metadata.committed_micro_batch, participants)


def metadata_of(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a stored value says (the last producer epoch is memory only)."""
    try:
        state = TxnState(value.status)
    except ValueError:
        raise ProtocolError(
            f"{transactional_id}: unknown transaction state {value.status}"
        ) from None
    if state not in STORABLE:
        raise ProtocolError(f"{transactional_id}: a stored value cannot be {state.kafka_name}")
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.timeout_ms,
        state=state,
        partitions=frozenset(value.partitions or ()),
        start_timestamp_ms=value.start_timestamp_ms,
        last_update_timestamp_ms=value.last_update_timestamp_ms,
        last_producer_id=value.previous_producer_id,
        **_sink_fields(value.sink),
    )


def _sink_fields(sink: SinkTransaction | None) -> dict[str, Any]:
    """The metadata's sink fields as a stored value says them (none: the defaults)."""
    if sink is None:
        return {}
    return {
        "participants": frozenset(
            Participant(p.tp, p.producer_id, p.producer_epoch) for p in sink.participants
        ),
        "micro_batch": sink.micro_batch,
        "committed_micro_batch": sink.committed_micro_batch,
    }


@dataclass
class StoredTransactions:
    """The transactional ids of one partition, by id."""

    entries: dict[str, TransactionEntry] = field(default_factory=dict)
    skipped: int = 0  # records that did not decode

    def replay(self, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        for key, value in records:
            try:
                self.apply(key, value)
            except ProtocolError:
                self.skipped += 1

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise ProtocolError("a transaction state record has no key")
        transactional_id = decode_key(key)
        if value is None:
            self.entries.pop(transactional_id, None)
        else:
            metadata = metadata_of(transactional_id, decode_value(value))
            self.entries[transactional_id] = TransactionEntry(metadata)

    def unfinished(self) -> list[TransactionEntry]:
        """Transactions whose commit or abort was stored but not completed: their markers
        may not all be written, so a new coordinator writes them again."""
        prepared = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        return [
            entry
            for entry in self.entries.values()
            if entry.metadata.state in prepared and entry.pending is None
        ]

    def summary(self) -> str:
        skipped = f" ({self.skipped} records that did not decode skipped)" if self.skipped else ""
        return f"{len(self.entries)} transactional ids{skipped}"
