"""A refused SASL step is counted in the request errors under its API, by the Logins
both listeners share, whichever dialect answers it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.core.context import BrokerContext
from brokerd.metrics import BrokerMetrics
from brokerd.replication.replica_fetcher import ReplicaFetcherManager
from brokerd.replication.replica_manager import ReplicaManager
from brokerd.serving.server import Connection, LoginRefused, Logins
from spark_replica.errors import SaslAuthenticationFailedError, ZooKeeperConnectionError
from spark_replica.transport import FrameStream

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


async def wrong_password(session: Any) -> bytes:
    raise SaslAuthenticationFailedError("authentication failed")


async def credentials_unreadable(session: Any) -> bytes:
    raise ZooKeeperConnectionError("no session")


async def accepted(session: Any) -> bytes:
    return b"server-final"


def test_refused_login_steps_are_counted_and_accepted_ones_are_not(tmp_path: Path) -> None:
    config = BrokerConfig(1, tmp_path, "h:1")
    metrics = BrokerMetrics()
    replicas = ReplicaManager(config, metrics)
    logins = Logins(
        BrokerContext(config, replicas, ReplicaFetcherManager(1)), metrics.request_errors
    )
    # A session that has not logged anyone in: all the step reads of it.
    session = cast(Any, SimpleNamespace(principal=None))
    connection = Connection(cast(FrameStream, None), "192.0.2.7", sasl=session)

    async def steps() -> None:
        for api_key, work in (
            (SASL_AUTHENTICATE, wrong_password),
            (SASL_AUTHENTICATE, wrong_password),
            (SASL_HANDSHAKE, credentials_unreadable),
        ):
            with pytest.raises(LoginRefused):
                await logins.step(connection, api_key, work)
        assert await logins.step(connection, SASL_AUTHENTICATE, accepted) == b"server-final"

    asyncio.run(steps())
    sample = metrics.registry.get_sample_value
    errors = "kafka_network_requestmetrics_errors_total"
    failed = {"request": "SaslAuthenticate", "error": "SASL_AUTHENTICATION_FAILED"}
    assert sample(errors, failed) == 2
    assert sample(errors, {"request": "SaslHandshake", "error": "REQUEST_TIMED_OUT"}) == 1
    assert sample(errors, {"request": "SaslAuthenticate", "error": "REQUEST_TIMED_OUT"}) is None
    replicas.close()
