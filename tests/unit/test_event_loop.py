"""Which event loop a broker runs on: the flag, then the environment, then the default for
its listener; a name it does not know is a ConfigError naming the choices."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from spark_replica import event_loop
from spark_replica.errors import ConfigError


def test_the_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENVIRONMENT_VARIABLE, "asyncio")
    assert event_loop.chosen("uvloop") == "uvloop"
    assert event_loop.chosen() == "asyncio"
    monkeypatch.delenv(event_loop.ENVIRONMENT_VARIABLE)
    assert event_loop.chosen(None, "uvloop") == "uvloop"


def test_a_broker_runs_on_uvloop_exactly_when_its_listener_uses_tls() -> None:
    assert event_loop.broker_default(uses_tls=True) == "uvloop"
    assert event_loop.broker_default(uses_tls=False) == "asyncio"


def test_an_unknown_loop_is_refused_naming_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENVIRONMENT_VARIABLE, "trio")
    with pytest.raises(ConfigError, match="use one of uvloop, asyncio"):
        event_loop.chosen()


@pytest.mark.parametrize(
    ("name", "kind"), [("uvloop", uvloop.Loop), ("asyncio", asyncio.BaseEventLoop)]
)
def test_each_kind_runs_a_coroutine(name: str, kind: type) -> None:
    async def which() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    loop = event_loop.run(which(), name)
    assert isinstance(loop, kind)
    if name == "asyncio":
        assert not isinstance(loop, uvloop.Loop)
