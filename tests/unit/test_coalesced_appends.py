"""Coalesced appends to an offsets partition, with a recording writer in place of the log:
what is asked in one turn of the event loop is written once, every caller gets its
batch's outcome, and a batch stays within its record bound."""

from __future__ import annotations

import asyncio

from brokerd.coordination.coalesced_appends import MAX_RECORDS, CoalescedAppends, Record
from spark_replica.errors import CoordinatorNotAvailableError


class Writer:
    def __init__(self, fail: Exception | None = None) -> None:
        self.writes: list[list[Record]] = []
        self.fail = fail

    async def __call__(self, records: list[Record]) -> None:
        self.writes.append(records)
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail


def records(name: str, count: int = 1) -> list[Record]:
    return [(f"{name}-{i}".encode(), b"v") for i in range(count)]


def test_appends_of_one_turn_are_one_write_and_each_caller_is_answered() -> None:
    async def scenario() -> Writer:
        writer = Writer()
        appends = CoalescedAppends(writer)
        await asyncio.gather(*(appends.append(records(f"g{i}")) for i in range(4)))
        await appends.append(records("later"))
        return writer

    writer = asyncio.run(scenario())
    assert [len(w) for w in writer.writes] == [4, 1]
    assert writer.writes[0] == [r for i in range(4) for r in records(f"g{i}")]


def test_a_failed_write_fails_every_caller_of_its_batch_with_its_own_error() -> None:
    async def scenario() -> list[BaseException | None]:
        appends = CoalescedAppends(Writer(CoordinatorNotAvailableError("no ISR")))
        outcomes = await asyncio.gather(
            appends.append(records("a")), appends.append(records("b")), return_exceptions=True
        )
        return list(outcomes)

    first, second = asyncio.run(scenario())
    assert isinstance(first, CoordinatorNotAvailableError)
    assert isinstance(second, CoordinatorNotAvailableError)
    assert first is not second and str(first) == "no ISR"


def test_a_batch_holds_at_most_its_bound_of_records() -> None:
    async def scenario() -> Writer:
        writer = Writer()
        appends = CoalescedAppends(writer)
        half = MAX_RECORDS // 2 + 1
        await asyncio.gather(*(appends.append(records(f"g{i}", half)) for i in range(3)))
        return writer

    writer = asyncio.run(scenario())
    assert [len(w) for w in writer.writes] == [MAX_RECORDS // 2 + 1] * 3
