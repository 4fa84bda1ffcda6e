"""Who may read /metrics (brokerd/metrics/access.py): the metrics.* configs checked at
start-up, the basic-authentication check, and the 401 answer."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from brokerd.config.broker import BrokerConfig
from brokerd.metrics.access import MetricsAccess
from brokerd.metrics.http_server import answer_for
from spark_replica.errors import ConfigError
from spark_replica.http_head import RequestLine, header_value
from spark_replica.tools.console.http import metrics_request
from spark_replica.tools.console.scrape import ScrapeSettings

LOGIN = {
    "metrics.ssl.keystore.location": "/etc/replog/metrics.pem",
    "metrics.basic.auth.username": "prometheus",
    "metrics.basic.auth.password": "s3cret: with colon",
}


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def test_metrics_configs_reach_the_broker_config() -> None:
    config = BrokerConfig(1, Path("/unused"), "127.0.0.1:2181").with_overrides(LOGIN)
    access = config.metrics_access
    assert access.keystore == Path("/etc/replog/metrics.pem")
    assert access.requires_login
    assert "s3cret" not in repr(config), "the password stays out of logs"
    assert not BrokerConfig(1, Path("/unused"), "zk").metrics_access.requires_login


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"metrics.basic.auth.username": "u", "metrics.basic.auth.password": "p"}, "HTTPS"),
        ({"metrics.basic.auth.username": "u"}, "both"),
        ({**LOGIN, "metrics.basic.auth.username": "a:b"}, "no ':'"),
        ({**LOGIN, "metrics.basic.auth.password": ""}, "empty"),
    ],
)
def test_unsafe_or_half_settings_are_refused(settings: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        MetricsAccess().with_settings(settings)


def test_only_the_configured_credentials_pass() -> None:
    access = MetricsAccess().with_settings(LOGIN)
    assert access.authorized(basic("prometheus:s3cret: with colon"))
    assert access.authorized("basic  " + basic("prometheus:s3cret: with colon")[6:])
    for wrong in (
        None,
        "",
        basic("prometheus:s3cret"),
        basic("other:s3cret: with colon"),
        "Bearer " + basic("prometheus:s3cret: with colon")[6:],
        "Basic not-base64!",
    ):
        assert not access.authorized(wrong), wrong
    assert MetricsAccess().authorized(None), "no credentials configured: open"


def test_an_unauthorized_request_gets_401_whatever_it_asks() -> None:
    registry = CollectorRegistry()
    for request in (RequestLine("GET", "/metrics"), RequestLine("GET", "/other")):
        answer = answer_for(request, registry, authorized=False)
        assert answer.startswith(b"HTTP/1.1 401 ")
        assert b'WWW-Authenticate: Basic realm="replog metrics"' in answer


def test_header_values_are_found_in_any_case() -> None:
    head = b"GET /metrics HTTP/1.1\r\nHost: b1\r\nauthorization:  Basic eA== \r\n\r\n"
    assert header_value(head, "Authorization") == "Basic eA=="
    assert header_value(head, "cookie") is None
    assert header_value(b"GET / HTTP/1.1\r\nX: \xff\r\n\r\n", "x") is None


def test_the_console_scrapes_with_its_own_login(tmp_path: Path) -> None:
    assert ScrapeSettings.from_properties({}) == ScrapeSettings()
    with pytest.raises(ConfigError, match="HTTPS"):
        ScrapeSettings.from_properties(
            {"metrics.basic.auth.username": "u", "metrics.basic.auth.password": "p"}
        )
    with pytest.raises(ConfigError, match="both"):
        ScrapeSettings.from_properties({"metrics.basic.auth.username": "u"})
    with pytest.raises(ConfigError, match="cannot load"):
        ScrapeSettings.from_properties({"metrics.ssl.truststore.location": str(tmp_path / "no")})
    request = metrics_request("b1", 9404, "/metrics", basic("u:p"))
    assert b"Authorization: Basic dTpw\r\n" in request
    assert (
        MetricsAccess()
        .with_settings(LOGIN)
        .authorized(request.decode().split("Authorization: ")[1].split("\r\n")[0])
        is False
    )
