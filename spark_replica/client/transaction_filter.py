"""Which fetched batches a reader gets under its isolation level: pure, no I/O.

Control batches (transaction markers) are never records to a reader, under either
level. read_uncommitted keeps every data batch, those of aborted transactions
included. Under read_committed the broker read only up to the last stable offset and
listed the aborted transactions of that range (producer id, first offset); their
batches are dropped, as Kafka's consumers drop them: walking the batches in offset
order, a producer is aborting once a batch reaches the first offset of one of its
listed transactions, its transactional batches are dropped while it is, and its ABORT
marker ends that (its next transaction may commit). A batch holds one producer's
records, so a batch is kept or dropped whole and each kept one stays consecutive.

Every batch of an answer goes through one filter in order, also those below the
reader's position, so that a marker read there still ends its producer's abort.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from spark_replica.records import BatchHeader, ControlType, decode_control_marker
from spark_replica.wire.native.fetch import AbortedTransaction

NO_PRODUCER_ID = -1


class TransactionFilter:
    """One partition's answer, walked batch by batch: `keeps` says which are records.

    `aborted` is the answer's list under read_committed, None under read_uncommitted.
    """

    def __init__(self, aborted: Iterable[AbortedTransaction] | None) -> None:
        self._read_committed = aborted is not None
        self._pending = deque(sorted(aborted or (), key=lambda t: t.first_offset))
        self._aborting: set[int] = set()

    def keeps(self, header: BatchHeader, batch: bytes | memoryview) -> bool:
        """Whether the batch's records reach the reader; call for every batch, in order."""
        if self._read_committed and header.producer_id != NO_PRODUCER_ID:
            while self._pending and self._pending[0].first_offset <= header.last_offset:
                self._aborting.add(self._pending.popleft().producer_id)
            if header.is_control:
                if header.producer_id in self._aborting and _is_abort(batch):
                    self._aborting.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in self._aborting:
                return False
        return not header.is_control


def _is_abort(batch: bytes | memoryview) -> bool:
    return decode_control_marker(batch).control_type is ControlType.ABORT
