"""Judging one chaos schedule's history against the promise of a replicated log.

Pure: it takes what the producers were told, what the consumer saw while the faults
ran, and a full read of every partition once the cluster has healed, and counts the
broken promises. No I/O, so each anomaly is unit tested with plain values.

The promise checked:
- an acknowledged record is in the final log exactly once (else *lost* or *duplicated*),
  at the offset it was acknowledged with (else *misplaced*);
- per key, acknowledged records are in the log in the order the producer sent them
  (else *reordered*);
- a record a consumer read is still at that offset at the end (else a *phantom read*:
  the consumer saw something that later disappeared or was replaced).

A record that was not acknowledged (its send failed or never finished) may or may not
be stored: it counts neither as lost nor as duplicated, and puts no order constraint on
its key. Records are told apart by value, which the workload makes unique.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

# The offset a leader reports for a duplicate of a batch appended long ago: it is
# acknowledged, but where it sits is not known to the producer.
UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class Send:
    """One record a producer sent; `offset` is None unless it was acknowledged."""

    key: bytes
    value: bytes
    partition: int | None = None
    offset: int | None = None

    @property
    def acknowledged(self) -> bool:
        return self.offset is not None


@dataclass(frozen=True, slots=True)
class Stored:
    """A record at an offset of a partition, as a consumer or the final read saw it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Counts:
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    phantom_reads: int = 0
    misplaced: int = 0

    def __add__(self, other: Counts) -> Counts:
        mine, theirs = asdict(self), asdict(other)
        return Counts(**{name: mine[name] + theirs[name] for name in mine})

    @property
    def clean(self) -> bool:
        return not any(asdict(self).values())


def check(
    producers: Sequence[Sequence[Send]],
    observed: Iterable[Stored],
    final: Iterable[Stored],
) -> Counts:
    """Count broken promises; `producers` holds each producer's sends in send order."""
    final_at: dict[tuple[int, int], Stored] = {}
    places: dict[bytes | None, list[tuple[int, int]]] = defaultdict(list)
    for record in final:
        final_at[(record.partition, record.offset)] = record
        places[record.value].append((record.partition, record.offset))
    acknowledged = [send for sends in producers for send in sends if send.acknowledged]
    copies = Counter({send.value: len(places.get(send.value, ())) for send in acknowledged})
    return Counts(
        lost=sum(1 for send in acknowledged if copies[send.value] == 0),
        duplicated=sum(count - 1 for count in copies.values() if count > 1),
        reordered=sum(_reordered(sends, places) for sends in producers),
        phantom_reads=sum(1 for seen in observed if not _same(seen, final_at)),
        misplaced=sum(1 for send in acknowledged if _misplaced(send, final_at, places)),
    )


def _reordered(sends: Sequence[Send], places: Mapping[bytes | None, list[tuple[int, int]]]) -> int:
    """Acknowledged records stored before an acknowledged record of their key sent earlier."""
    furthest: dict[bytes, tuple[int, int]] = {}
    count = 0
    for send in sends:
        found = places.get(send.value)
        if not send.acknowledged or not found:
            continue
        place = found[0]
        before = furthest.get(send.key)
        if before is not None and place < before:
            count += 1
        else:
            furthest[send.key] = place
    return count


def _same(seen: Stored, final_at: Mapping[tuple[int, int], Stored]) -> bool:
    stored = final_at.get((seen.partition, seen.offset))
    return stored is not None and (stored.key, stored.value) == (seen.key, seen.value)


def _misplaced(
    send: Send,
    final_at: Mapping[tuple[int, int], Stored],
    places: Mapping[bytes | None, list[tuple[int, int]]],
) -> bool:
    """Stored, but not where the acknowledgement said (a lost one is only `lost`)."""
    if send.offset == UNKNOWN_OFFSET or not places.get(send.value):
        return False
    assert send.partition is not None and send.offset is not None
    stored = final_at.get((send.partition, send.offset))
    return stored is None or stored.value != send.value
