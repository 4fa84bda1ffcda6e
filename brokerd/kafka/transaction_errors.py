"""The error code a transactional request's answer carries, by the version asked.

PRODUCER_FENCED (90, KIP-588) is newer than the transaction APIs: clients that ask with
an older version know a fenced producer as INVALID_PRODUCER_EPOCH (47), which is what
Kafka's brokers tell them. Each API says from which version it knows the new code.
"""

from __future__ import annotations

from spark_replica.errors import InvalidProducerEpochError, ProducerFencedError, code_of


def answered_code(error: BaseException, version: int, fenced_since: int) -> int:
    """`error`'s code, PRODUCER_FENCED told as INVALID_PRODUCER_EPOCH before `fenced_since`."""
    if isinstance(error, ProducerFencedError) and version < fenced_since:
        return InvalidProducerEpochError.code
    return code_of(error)
