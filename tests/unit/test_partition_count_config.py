"""max.partitions.per.topic: a positive broker config, at least num.partitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from spark_replica.errors import ConfigError


def config(**overrides: str) -> BrokerConfig:
    return BrokerConfig(1, Path("/unused"), "127.0.0.1:2181").with_overrides(overrides)


def test_the_bound_defaults_to_ten_thousand_and_can_be_set() -> None:
    assert config().max_partitions_per_topic == 10_000
    assert config(**{"max.partitions.per.topic": "50"}).max_partitions_per_topic == 50


@pytest.mark.parametrize(
    "overrides",
    [
        {"max.partitions.per.topic": "0"},
        {"max.partitions.per.topic": "many"},
        {"max.partitions.per.topic": "4", "num.partitions": "5"},
    ],
)
def test_a_bound_that_cannot_hold_is_refused(overrides: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        config(**overrides)
