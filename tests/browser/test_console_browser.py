"""The console page in a real headless Chromium against a live 3-broker cluster: brokers,
controller, partitions with leader/ISR/HW, a chart with data after producing, then a
broker killed and shown dead with its partitions marked under-replicated in red.

Uses the system's Chromium and chromedriver (given by path, so Selenium downloads
nothing); skipped when either is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import (
    BrokerFactory,
    controller_of,
    create,
    produce,
    run,
    running_console,
    start_cluster,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DEADLINE_S = 60.0
# The page's red for under-replicated rows (--bad-bg in console.css).
UNDER_REPLICATED_BACKGROUND = "rgb(253, 236, 234)"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
        reason=f"needs Chromium at {CHROMIUM} and chromedriver at {CHROMEDRIVER}",
    ),
]

BROKERS_JS = """
return Array.from(document.querySelectorAll('#brokers tbody tr[data-broker]')).map(r => ({
  id: Number(r.dataset.broker), alive: r.dataset.alive === 'true',
  controller: r.dataset.controller === 'true', text: r.textContent}));
"""
PARTITIONS_JS = """
return Array.from(document.querySelectorAll('#partitions tbody tr[data-topic]')).map(r => ({
  topic: r.dataset.topic, partition: Number(r.dataset.partition), leader: r.dataset.leader,
  isr: r.dataset.isr, hw: r.dataset.hw, red: r.classList.contains('under-replicated'),
  background: getComputedStyle(r.cells[0]).backgroundColor}));
"""
CHART_JS = """
const chart = document.getElementById(arguments[0]);
return {points: Number(chart.dataset.points), max: Number(chart.dataset.max || 0),
        lines: chart.querySelectorAll('polyline').length};
"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1200",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(driver, script: str, check, *args: object):
    """The first result of `script` that passes `check`, polled until DEADLINE_S."""
    from selenium.webdriver.support.wait import WebDriverWait

    def passed(d):
        value = d.execute_script(script, *args)
        return value if check(value) else False

    return WebDriverWait(driver, DEADLINE_S, poll_frequency=0.25).until(
        passed, message=f"page never passed {check}: last {driver.execute_script(script, *args)}"
    )


def test_console_page_shows_the_cluster_and_a_broker_kill(
    brokers: BrokerFactory, zk_connect: str, browser
) -> None:
    start_cluster(brokers)
    run(create(brokers.bootstrap, "orders", partitions=2))
    run(produce(brokers.bootstrap, "orders", ["a", "b", "c"]))
    controller = controller_of(zk_connect)

    with running_console("--zookeeper", zk_connect) as url:
        browser.get(url + "/")
        shown = wait_until(browser, BROKERS_JS, lambda rows: len(rows) == 3)
        assert [(b["id"], b["alive"], b["controller"]) for b in shown] == [
            (i, True, i == controller) for i in (1, 2, 3)
        ]
        assert all("alive" in b["text"] for b in shown)

        partitions = wait_until(
            browser,
            PARTITIONS_JS,
            lambda rows: [r["hw"] for r in rows] == ["3", "0"],
        )
        for row in partitions:
            assert row["topic"] == "orders"
            assert row["leader"] in {"1", "2", "3"}
            assert sorted(row["isr"].split(",")) == ["1", "2", "3"]
            assert not row["red"]

        # Rates are increases between scrapes: produce once the chart has a first point.
        wait_until(browser, CHART_JS, lambda c: c["points"] >= 1, "chart-bytes_in")
        run(produce(brokers.bootstrap, "orders", [f"record-{i}" for i in range(500)]))
        chart = wait_until(browser, CHART_JS, lambda c: c["max"] > 1, "chart-bytes_in")
        assert chart["lines"] == 1

        victim = next(i for i in (1, 2, 3) if i != controller)
        brokers.brokers[victim].kill()
        shown = wait_until(
            browser,
            BROKERS_JS,
            lambda rows: not next(r for r in rows if r["id"] == victim)["alive"],
        )
        assert "dead" in next(r for r in shown if r["id"] == victim)["text"]
        partitions = wait_until(
            browser, PARTITIONS_JS, lambda rows: len(rows) == 2 and all(r["red"] for r in rows)
        )
        for row in partitions:
            assert str(victim) not in row["isr"].split(",")
            assert row["background"] == UNDER_REPLICATED_BACKGROUND
