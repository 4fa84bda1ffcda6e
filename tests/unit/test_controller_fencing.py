"""How a broker fences controller requests by controller epoch and broker epoch."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.api.context import BrokerContext
from brokerd.api.controller_requests import check_controller
from brokerd.config import BrokerConfig
from brokerd.replica_fetcher import ReplicaFetcherManager
from brokerd.replica_manager import ReplicaManager
from spark_replica.errors import (
    BrokerNotAvailableError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from spark_replica.protocol.controller_requests import ControllerHeader


def broker_context(tmp_path: Path, broker_epoch: int, controller_epoch: int) -> BrokerContext:
    config = BrokerConfig(1, tmp_path, "h:1")
    ctx = BrokerContext(config, ReplicaManager(config), ReplicaFetcherManager(1))
    ctx.broker_epoch = broker_epoch
    ctx.controller_epoch = controller_epoch
    return ctx


def test_current_request_is_accepted_and_raises_the_known_controller_epoch(tmp_path: Path) -> None:
    ctx = broker_context(tmp_path, broker_epoch=10, controller_epoch=3)
    check_controller(ctx, ControllerHeader(2, 4, 10))
    assert ctx.controller_epoch == 4


def test_older_controller_epoch_is_stale(tmp_path: Path) -> None:
    ctx = broker_context(tmp_path, broker_epoch=10, controller_epoch=3)
    with pytest.raises(StaleControllerEpochError):
        check_controller(ctx, ControllerHeader(2, 2, 10))


def test_request_for_an_earlier_incarnation_is_stale(tmp_path: Path) -> None:
    ctx = broker_context(tmp_path, broker_epoch=10, controller_epoch=3)
    with pytest.raises(StaleBrokerEpochError):
        check_controller(ctx, ControllerHeader(2, 3, 9))


@pytest.mark.parametrize("known", [-1, 10])
def test_request_for_a_registration_in_progress_is_retriable(tmp_path: Path, known: int) -> None:
    ctx = broker_context(tmp_path, broker_epoch=known, controller_epoch=3)
    with pytest.raises(BrokerNotAvailableError) as raised:
        check_controller(ctx, ControllerHeader(2, 3, 11))
    assert raised.value.retriable
    assert ctx.controller_epoch == 3, "a refused request changes nothing"
