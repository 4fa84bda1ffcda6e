"""The Kafka listener's cache of converted batches: LRU within a byte budget."""

from __future__ import annotations

from brokerd.kafka.fetch_cache import BatchKey, FetchCache


def key(offset: int, epoch: int = 0, crc: int = 0) -> BatchKey:
    return BatchKey("t", 0, offset, epoch, crc)


def test_converts_once_then_serves_from_the_cache() -> None:
    cache = FetchCache(100)
    calls: list[int] = []

    def convert() -> bytes:
        calls.append(1)
        return b"x" * 10

    assert cache.get_or_convert(key(0), convert) == b"x" * 10
    assert cache.get_or_convert(key(0), convert) == b"x" * 10
    assert len(calls) == 1


def test_evicts_least_recently_used_within_the_budget() -> None:
    cache = FetchCache(25)
    cache.get_or_convert(key(0), lambda: b"a" * 10)
    cache.get_or_convert(key(1), lambda: b"b" * 10)
    cache.get_or_convert(key(0), lambda: b"?")  # touch 0: 1 is now the oldest
    cache.get_or_convert(key(2), lambda: b"c" * 10)
    assert cache.used_bytes == 20
    assert cache.get_or_convert(key(1), lambda: b"new") == b"new"
    assert cache.get_or_convert(key(0), lambda: b"?") == b"a" * 10


def test_a_batch_over_the_budget_is_not_kept() -> None:
    cache = FetchCache(5)
    assert cache.get_or_convert(key(0), lambda: b"123456") == b"123456"
    assert len(cache) == 0 and cache.used_bytes == 0


def test_a_rewritten_batch_is_a_different_entry() -> None:
    cache = FetchCache(100)
    cache.get_or_convert(key(0, epoch=1, crc=7), lambda: b"old")
    assert cache.get_or_convert(key(0, epoch=1, crc=8), lambda: b"new") == b"new"
    assert cache.get_or_convert(key(0, epoch=2, crc=7), lambda: b"other") == b"other"
