"""Rates from two scrapes of the brokers' counters: per topic, per broker, per cluster,
through restarts (a counter that went down) and failed scrapes."""

from __future__ import annotations

import pytest

from spark_replica.errors import ProtocolError
from spark_replica.tools.console.rates import RateTracker, Scrape, parse_counters, rates_between


def metrics_text(bytes_in: dict[str, float], messages_in: float = 0.0) -> str:
    lines = [
        "# HELP kafka_server_brokertopicmetrics_bytesin_total Bytes in",
        "# TYPE kafka_server_brokertopicmetrics_bytesin_total counter",
    ]
    for topic, value in bytes_in.items():
        lines.append(f'kafka_server_brokertopicmetrics_bytesin_total{{topic="{topic}"}} {value}')
        lines.append(f'kafka_server_brokertopicmetrics_bytesin_created{{topic="{topic}"}} 1.7e9')
    lines += [
        "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter",
        f'kafka_server_brokertopicmetrics_messagesin_total{{topic="t"}} {messages_in}',
        "# TYPE kafka_server_replicamanager_partitioncount gauge",
        "kafka_server_replicamanager_partitioncount 4.0",
    ]
    return "\n".join(lines) + "\n"


def test_only_the_rate_counters_are_read_per_topic() -> None:
    counters = parse_counters(metrics_text({"a": 10, "b": 5}, messages_in=3))
    assert counters == {
        ("bytes_in", "a"): 10.0,
        ("bytes_in", "b"): 5.0,
        ("messages_in", "t"): 3.0,
    }


def test_text_that_is_not_prometheus_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        parse_counters('kafka_server_brokertopicmetrics_bytesin_total{topic="a"} not-a-number\n')


def test_a_rate_is_the_increase_over_the_time_between_scrapes() -> None:
    earlier = Scrape(10.0, {("bytes_in", "a"): 100.0})
    later = Scrape(12.0, {("bytes_in", "a"): 300.0, ("bytes_in", "new"): 50.0})
    assert rates_between(earlier, later) == {("bytes_in", "a"): 100.0, ("bytes_in", "new"): 25.0}


def test_a_counter_that_went_down_restarted_from_zero() -> None:
    earlier = Scrape(0.0, {("bytes_in", "a"): 1000.0})
    later = Scrape(4.0, {("bytes_in", "a"): 40.0})
    assert rates_between(earlier, later) == {("bytes_in", "a"): 10.0}


def test_no_time_between_scrapes_gives_no_rate() -> None:
    scrape = Scrape(5.0, {("bytes_in", "a"): 1.0})
    assert rates_between(scrape, scrape) == {}


def test_the_cluster_rate_sums_the_brokers_and_needs_two_scrapes_of_one() -> None:
    tracker = RateTracker()
    tracker.record(1000.0, {1: Scrape(0.0, {("bytes_in", "a"): 0.0}), 2: "refused"})
    assert tracker.as_json()["points"] == []
    assert tracker.as_json()["errors"] == {"2": "refused"}
    tracker.record(
        2000.0,
        {
            1: Scrape(1.0, {("bytes_in", "a"): 100.0, ("messages_in", "a"): 4.0}),
            2: Scrape(1.0, {("bytes_in", "a"): 7.0}),
        },
    )
    document = tracker.as_json()
    assert document["points"] == [
        {"t": 2000.0, "bytes_in": 100.0, "bytes_out": 0.0, "messages_in": 4.0}
    ]
    assert document["brokers"] == {"1": {"bytes_in": 100.0, "bytes_out": 0.0, "messages_in": 4.0}}
    assert document["topics"] == {"a": {"bytes_in": 100.0, "bytes_out": 0.0, "messages_in": 4.0}}
    assert document["errors"] == {}


def test_a_failed_scrape_keeps_the_last_good_one_and_the_next_averages_over_the_gap() -> None:
    tracker = RateTracker()
    tracker.record(0.0, {1: Scrape(0.0, {("bytes_in", "a"): 0.0})})
    tracker.record(1000.0, {1: "timed out"})
    tracker.record(2000.0, {1: Scrape(2.0, {("bytes_in", "a"): 50.0})})
    assert [p["bytes_in"] for p in tracker.as_json()["points"]] == [25.0]


def test_history_is_bounded() -> None:
    tracker = RateTracker(history_points=3)
    for second in range(10):
        tracker.record(second * 1000.0, {1: Scrape(float(second), {("bytes_in", "a"): 0.0})})
    assert [p["t"] for p in tracker.as_json()["points"]] == [7000.0, 8000.0, 9000.0]
