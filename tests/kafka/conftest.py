"""Fixtures of the Kafka-client acceptance tests: a three-broker cluster whose brokers
all run a Kafka listener (BrokerFactory gives each one), stopped by the `brokers`
fixture's teardown."""

from __future__ import annotations

import pytest

from tests.support import BrokerFactory, start_cluster


@pytest.fixture
def kafka_cluster(brokers: BrokerFactory) -> BrokerFactory:
    start_cluster(brokers)
    return brokers
