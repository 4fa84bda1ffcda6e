"""The console page in a real headless Chromium against a live 3-broker cluster, in three
states: healthy (brokers, controller, partitions with leader/ISR/HW, a chart with data
after producing); one broker killed (shown dead, its metrics unreachable since the kill,
its partitions marked under-replicated in red); everything down (brokers and ZooKeeper
stopped: every panel greyed and saying since when and why it is stale, the header's
time of the last read standing still). The record browser is used while healthy: a page
of records from an offset, as text and as hex, the next page, and a bad query answered
in the page. A screenshot of each state is saved in the
test's output directory and its path printed.

Uses the system's Chromium and chromedriver (given by path, so Selenium downloads
nothing); skipped when either is not installed. The cluster has a ZooKeeper of its own,
since the test stops it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
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
  background: getComputedStyle(r.cells[0]).backgroundColor,
  replicas: Array.from(r.cells[3].querySelectorAll('.replica')).map(s => parseInt(s.textContent)),
  dead: r.cells[3].dataset.deadReplicas, deadMarks: r.cells[3].querySelectorAll('.dead').length,
  notPreferred: r.dataset.notPreferred === 'true', leaderText: r.cells[2].textContent}));
"""
PANELS_JS = """
const panels = {};
for (const section of document.querySelectorAll('section[data-panel]')) {
  const note = section.querySelector('.panel-note');
  panels[section.id] = {stale: section.classList.contains('stale'),
                        note: note.hidden ? '' : note.textContent};
}
const status = document.getElementById('status');
return {panels, status: status.textContent, stale: status.dataset.stale === 'true',
        text: document.body.innerText};
"""
UNREACHABLE_JS = """
const row = document.querySelector(`#brokers tbody tr[data-broker="${arguments[0]}"]`);
return row ? row.cells[2].dataset.unreachable === 'true' && row.cells[2].textContent : false;
"""
PAGE_JS = """
const page = document.getElementById('partitions-page');
return {page: Number(page.dataset.page), pages: Number(page.dataset.pages),
        matching: Number(page.dataset.matching), text: page.textContent,
        rows: document.querySelectorAll('#partitions tbody tr').length};
"""
GROUPS_JS = """
return Array.from(document.querySelectorAll('#groups .group')).map(g => ({
  group: g.dataset.group, state: g.dataset.state, lag: g.dataset.totalLag,
  rows: Array.from(g.querySelectorAll('tbody tr')).map(r => r.dataset.lag), text: g.textContent}));
"""
CONFIGS_JS = """
return Array.from(document.querySelectorAll('#configs tbody tr')).map(r => ({
  topic: r.dataset.topic, text: r.cells[3].textContent}));
"""
AXES_JS = """
const chart = document.getElementById(arguments[0]);
const texts = (selector) => Array.from(chart.querySelectorAll(selector)).map(t => t.textContent);
return {y: texts('.y-tick'), x: texts('.x-tick'), titles: texts('.axis-title'),
        lines: chart.querySelectorAll('line.axis').length};
"""
RECORDS_JS = """
const error = document.getElementById('record-error');
return {error: error.hidden ? '' : error.textContent,
        summary: document.getElementById('record-summary').textContent,
        next: !document.getElementById('record-next').disabled,
        rows: Array.from(document.querySelectorAll('#records tbody tr')).map(r => ({
          offset: Number(r.dataset.offset), key: r.cells[2].textContent,
          value: r.cells[3].textContent}))};
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


@pytest.fixture
def cluster(own_zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(f"{own_zookeeper.connect_string}/console", tmp_path / "brokers")
    try:
        yield factory
    finally:
        factory.stop_all()


def commit_offsets(kafka_bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A consumer group with committed offsets and no members (state Empty)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        committed = [TopicPartition(topic, p, offset) for p, offset in offsets.items()]
        consumer.commit(offsets=committed, asynchronous=False)
    finally:
        consumer.close()


def screenshot(driver, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


def fill(driver, field_id: str, value: str) -> None:
    field = driver.find_element("id", field_id)
    field.clear()
    field.send_keys(value)


def read_records(driver, tmp_path: Path) -> None:
    """The record browser on `orders` (a, b, c, then record-0 ... record-499 in partition 0)."""
    from selenium.webdriver.support.select import Select

    driver.execute_script("document.getElementById('records-panel').scrollIntoView()")
    fill(driver, "record-topic", "orders")
    fill(driver, "record-partition", "0")
    fill(driver, "record-offset", "1")
    fill(driver, "record-limit", "3")
    driver.find_element("id", "record-read").click()
    page = wait_until(driver, RECORDS_JS, lambda shown: len(shown["rows"]) == 3)
    assert [(r["offset"], r["key"], r["value"]) for r in page["rows"]] == [
        (1, "null", "b"),
        (2, "null", "c"),
        (3, "null", "record-0"),
    ]
    assert page["error"] == ""
    assert page["summary"].startswith("orders-0: offsets 1 to 3 of 0 to 502")
    screenshot(driver, tmp_path, "console-records.png")

    driver.find_element("id", "record-next").click()
    page = wait_until(driver, RECORDS_JS, lambda shown: shown["rows"][0]["offset"] == 4)
    assert [r["value"] for r in page["rows"]] == ["record-1", "record-2", "record-3"]
    Select(driver.find_element("id", "record-format")).select_by_value("hex")
    driver.find_element("id", "record-read").click()
    page = wait_until(driver, RECORDS_JS, lambda shown: shown["rows"][0]["value"] == b"b".hex())

    fill(driver, "record-topic", "nope")
    driver.find_element("id", "record-read").click()
    page = wait_until(driver, RECORDS_JS, lambda shown: shown["error"] != "")
    assert page["error"] == "topic 'nope' does not exist"
    assert page["rows"] == [] or not driver.find_element("id", "records").is_displayed()
    fill(driver, "record-topic", "orders")
    fill(driver, "record-offset", "9999")
    driver.find_element("id", "record-read").click()
    page = wait_until(driver, RECORDS_JS, lambda shown: "9999" in shown["error"])
    assert page["error"] == "offset 9999 is outside orders-0, which holds offsets 0 to 502"


def wait_until(driver, script: str, check, *args: object):
    """The first result of `script` that passes `check`, polled until DEADLINE_S."""
    from selenium.webdriver.support.wait import WebDriverWait

    def passed(d):
        value = d.execute_script(script, *args)
        return value if check(value) else False

    return WebDriverWait(driver, DEADLINE_S, poll_frequency=0.25).until(
        passed, message=f"page never passed {check}: last {driver.execute_script(script, *args)}"
    )


def test_console_page_healthy_then_a_broker_killed_then_everything_down(
    cluster: BrokerFactory, own_zookeeper: EmbeddedZooKeeper, browser, tmp_path: Path
) -> None:
    brokers = cluster
    zk_connect = brokers.zk_connect
    start_cluster(brokers)
    run(create(brokers.bootstrap, "orders", partitions=2, **{"retention.ms": "60000"}))
    run(produce(brokers.bootstrap, "orders", ["a", "b", "c"]))
    # More partitions than a page of the table holds (25).
    run(create(brokers.bootstrap, "clicks", partitions=24, rf=1))
    controller = controller_of(zk_connect)
    commit_offsets(brokers.kafka_bootstrap(), "billing", "orders", {0: 1})

    with running_console("--zookeeper", zk_connect, "--interval", "0.5") as url:
        browser.get(url + "/")
        shown = wait_until(browser, BROKERS_JS, lambda rows: len(rows) == 3)
        assert [(b["id"], b["alive"], b["controller"]) for b in shown] == [
            (i, True, i == controller) for i in (1, 2, 3)
        ]
        assert all("alive" in b["text"] for b in shown)

        # 26 partitions, and the 50 of __consumer_offsets that the commit made: four
        # pages; the topic filter narrows them to one.
        paging = wait_until(browser, PAGE_JS, lambda page: page["matching"] == 76)
        assert (paging["page"], paging["pages"], paging["rows"]) == (1, 4, 25)
        browser.find_element("id", "partitions-next").click()
        paging = wait_until(browser, PAGE_JS, lambda page: page["page"] == 2)
        assert paging["rows"] == 25
        browser.find_element("id", "partition-filter").send_keys("ord")
        paging = wait_until(browser, PAGE_JS, lambda page: page["matching"] == 2)
        assert (paging["page"], paging["pages"], paging["rows"]) == (1, 1, 2)

        partitions = wait_until(
            browser,
            PARTITIONS_JS,
            lambda rows: [r["hw"] for r in rows] == ["3", "0"],
        )
        for row in partitions:
            assert (row["dead"], row["deadMarks"], row["notPreferred"]) == ("", 0, False)
            assert row["topic"] == "orders"
            assert row["leader"] in {"1", "2", "3"}
            assert sorted(row["isr"].split(",")) == ["1", "2", "3"]
            assert not row["red"]

        # Rates are increases between scrapes: produce once the chart has a first point.
        wait_until(browser, CHART_JS, lambda c: c["points"] >= 1, "chart-bytes_in")
        run(produce(brokers.bootstrap, "orders", [f"record-{i}" for i in range(500)]))
        chart = wait_until(browser, CHART_JS, lambda c: c["max"] > 1, "chart-bytes_in")
        assert chart["lines"] == 1
        for series, unit, zero, title in (
            ("bytes_in", "B/s", "0 B/s", "bytes/s"),
            ("bytes_out", "B/s", "0 B/s", "bytes/s"),
            ("messages_in", "msg/s", "0.0 msg/s", "messages/s"),
        ):
            shown = browser.execute_script(AXES_JS, f"chart-{series}")
            assert shown["lines"] == 2, series
            assert len(shown["y"]) == 3 and all(t.endswith(unit) for t in shown["y"]), shown
            assert shown["y"][0] == zero, shown
            assert shown["x"][-1] == "now" and shown["x"][0].endswith(" s"), shown
            assert shown["titles"] == ["time (seconds ago)", title]
        configs = wait_until(browser, CONFIGS_JS, lambda rows: len(rows) == 3)
        assert {r["topic"]: r["text"] for r in configs} == {
            "__consumer_offsets": "cleanup.policy=compactsegment.bytes=104857600",
            "clicks": "none (the brokers' defaults)",
            "orders": "retention.ms=60000",
        }
        groups = wait_until(browser, GROUPS_JS, lambda shown: len(shown) == 1)
        assert (groups[0]["group"], groups[0]["state"], groups[0]["lag"]) == (
            "billing",
            "Empty",
            "502",
        )
        assert groups[0]["rows"] == ["502"]

        healthy = wait_until(
            browser,
            PANELS_JS,
            lambda page: not page["stale"] and not any(p["stale"] for p in page["panels"].values()),
        )
        assert healthy["status"].startswith("read from zookeeper at ")
        assert "stale" not in healthy["text"]
        screenshot(browser, tmp_path, "console-healthy.png")
        read_records(browser, tmp_path)

        # The preferred leader of a partition, and not the controller: its partition's
        # leadership moves to a replica that is not the preferred one.
        victim = next(r["replicas"][0] for r in partitions if r["replicas"][0] != controller)
        brokers.brokers[victim].kill()
        shown = wait_until(
            browser,
            BROKERS_JS,
            lambda rows: not next(r for r in rows if r["id"] == victim)["alive"],
        )
        assert "dead" in next(r for r in shown if r["id"] == victim)["text"]
        unreachable = wait_until(browser, UNREACHABLE_JS, bool, victim)
        assert f"broker {victim} unreachable since " in unreachable
        partitions = wait_until(
            browser, PARTITIONS_JS, lambda rows: len(rows) == 2 and all(r["red"] for r in rows)
        )
        for row in partitions:
            assert str(victim) not in row["isr"].split(",")
            assert row["background"] == UNDER_REPLICATED_BACKGROUND
            assert (row["dead"], row["deadMarks"]) == (str(victim), 1)
        moved = wait_until(
            browser,
            PARTITIONS_JS,
            lambda rows: all(r["notPreferred"] for r in rows if r["replicas"][0] == victim),
        )
        for row in moved:
            if row["replicas"][0] == victim:
                assert f"not preferred (preferred {victim})" in row["leaderText"]
        killed = browser.execute_script(PANELS_JS)
        assert not killed["panels"]["brokers-panel"]["stale"]
        assert not killed["panels"]["partitions-panel"]["stale"]
        screenshot(browser, tmp_path, "console-broker-killed.png")

        brokers.stop_all()
        own_zookeeper.stop()
        down = wait_until(
            browser,
            PANELS_JS,
            lambda page: all(
                page["panels"][name]["stale"]
                for name in ("summary-panel", "brokers-panel", "partitions-panel", "rates-panel")
            ),
        )
        assert down["stale"]
        assert down["status"].startswith("stale — ")
        assert "stale — ZooKeeper unreachable since " in down["panels"]["brokers-panel"]["note"]
        assert "stale — brokers unreachable since " in down["panels"]["partitions-panel"]["note"]
        assert " unreachable since " in down["panels"]["rates-panel"]["note"]
        # One collapsed line per panel, not one per broker and per round.
        assert down["text"].count("ConnectionRefusedError") <= 2
        status = down["status"]
        wait_until(browser, PANELS_JS, lambda page: "failed reads" in page["text"])
        assert browser.execute_script(PANELS_JS)["status"] == status
        screenshot(browser, tmp_path, "console-all-down.png")
