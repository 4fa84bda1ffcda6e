"""The producer's buffer.memory accounting, with plain values."""

from __future__ import annotations

import pytest

from spark_replica.client import ProducerConfig
from spark_replica.client.buffer_pool import BufferPool, exhausted_error
from spark_replica.errors import (
    BufferExhaustedError,
    ConfigError,
    MessageTooLargeError,
    TimeoutExpiredError,
)


def test_reservations_stop_at_the_limit_and_releases_make_room() -> None:
    released: list[int] = []
    pool = BufferPool(100)
    pool.add_listener(lambda: released.append(pool.used_bytes))
    assert pool.try_reserve(60) and pool.try_reserve(40)
    assert not pool.try_reserve(1), "full: nothing reserved"
    assert pool.used_bytes == 100
    pool.release(60)
    assert released == [40], "listeners hear of every release"
    assert pool.try_reserve(50) and not pool.try_reserve(11)
    assert pool.peak_bytes == 100


def test_the_peak_is_the_most_ever_held_at_once() -> None:
    pool = BufferPool(1_000)
    pool.try_reserve(300)
    pool.release(300)
    pool.try_reserve(200)
    assert pool.peak_bytes == 300
    pool.try_reserve(500)
    assert pool.peak_bytes == 700


def test_a_record_larger_than_the_buffer_is_refused_rather_than_waited_for() -> None:
    pool = BufferPool(100)
    pool.check_fits(100)
    with pytest.raises(MessageTooLargeError, match=r"buffer\.memory \(buffer_memory=100"):
        pool.check_fits(101)


def test_the_exhausted_error_is_a_timeout_naming_the_settings() -> None:
    error = exhausted_error(117, 32 * 1024 * 1024, 60_000)
    assert isinstance(error, BufferExhaustedError) and isinstance(error, TimeoutExpiredError)
    assert "buffer.memory (buffer_memory=33554432 bytes)" in str(error)
    assert "max_block_ms=60000" in str(error)


def test_buffer_settings_are_checked() -> None:
    assert ProducerConfig().buffer_memory == 32 * 1024 * 1024
    assert ProducerConfig().max_block_ms == 60_000
    with pytest.raises(ConfigError, match="buffer_memory"):
        ProducerConfig(buffer_memory=0)
    with pytest.raises(ConfigError, match="max_block_ms"):
        ProducerConfig(max_block_ms=-1)
    assert ProducerConfig(max_block_ms=0).max_block_ms == 0, "fail at once when full"


def test_a_retry_backoff_above_its_maximum_is_the_maximum_constant() -> None:
    policy = ProducerConfig(retry_backoff_ms=5_000, retry_backoff_max_ms=2_000).retry_policy
    assert policy.waiting_delay_s(1) == policy.waiting_delay_s(3) == 2.0
    default = ProducerConfig().retry_policy
    assert (default.backoff_s, default.max_backoff_s) == (0.1, 1.0)
