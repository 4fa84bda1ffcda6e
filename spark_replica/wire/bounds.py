"""The one check of every size and count a peer sends, before anything is allocated for it.

A count or length on the wire is the peer's claim; what is really there is the bytes
that remain of the frame (or of the records). Each item a count announces takes at
least some bytes, so a claim of more items than the remaining bytes could hold is a lie
and is refused before a list, an array or a buffer is sized from it. A 69-byte record
batch claiming 2^31-1 records must cost a comparison, not gigabytes.

Both codecs call this one function: the Reader both protocols share
(spark_replica.wire.primitives: array, tagged-field, string and bytes lengths) and the
Kafka record batch reader (record and header counts, spark_replica.wire.kafka.records
.batch). Each passes the error type of its layer: ProtocolError for a request that does
not decode, CorruptMessageError for records. This module does no I/O.
"""

from __future__ import annotations

from spark_replica.errors import ProtocolError, ReplogError

# The fewest bytes a Kafka v2 record takes: its length, attributes, timestamp delta,
# offset delta, key length, value length and header count, one varint byte each.
MIN_RECORD_BYTES = 7
# The fewest bytes a record header takes: its key length and its value length.
MIN_RECORD_HEADER_BYTES = 2


def bounded_count(
    count: int,
    remaining: int,
    what: str,
    item_bytes: int = 1,
    error: type[ReplogError] = ProtocolError,
) -> int:
    """`count` as given, if that many items of at least `item_bytes` each can fit in
    `remaining` bytes; otherwise raise `error` (naming `what`) before anything is sized
    from it. A negative count is refused too: callers handle null (-1) themselves."""
    if count < 0 or count * item_bytes > remaining:
        raise error(
            f"{what} count {count} cannot fit in the {remaining} bytes that remain "
            f"(each takes at least {item_bytes})"
        )
    return count
