"""What a reader's isolation level means to a read, decided once for both listeners.

A read_uncommitted consumer reads up to the high watermark; a read_committed one up to
the last stable offset (Partition.last_stable_offset: below the first transaction not
yet stable), and its answer lists the aborted transactions that have records in the
batches it returns, so that the reader drops them (Kafka's Fetch; the log finds them in
its aborted-transaction index, Log.aborted_transactions). The Kafka listener
(brokerd/kafka/fetch.py, offsets.py) and replog's (brokerd/native/fetch.py,
list_offsets.py) both read through here. Replicas copy everything and never ask.
"""

from __future__ import annotations

from brokerd.log.transaction_index import AbortedTransaction
from brokerd.replication.partition import Partition
from spark_replica.records import iter_batches


def readable_end(partition: Partition, read_committed: bool) -> int:
    """The offset a consumer's read, and its LATEST offset, stop below."""
    return partition.last_stable_offset if read_committed else partition.high_watermark


def aborted_in(partition: Partition, fetch_offset: int, stored: bytes) -> list[AbortedTransaction]:
    """The aborted transactions with records among the batches read from `fetch_offset`
    (each has a producer_id and a first_offset, the two fields both Fetch answers list)."""
    headers = [header for header, _ in iter_batches(stored)]
    if not headers:
        return []
    return partition.log.aborted_transactions(fetch_offset, headers[-1].next_offset)
