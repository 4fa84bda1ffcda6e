"""Errors that repeat one cause per broker collapse into one part with a count and the
addresses; different causes stay apart; a message without repeats is left as it was."""

from __future__ import annotations

from spark_replica.tools.console.error_lines import collapse_error


def refused(port: int) -> str:
    address = f"127.0.0.1:{port}"
    return (
        f"cannot connect to broker at {address}: cannot connect to {address}: "
        f"ConnectionRefusedError(111, \"Connect call failed ('127.0.0.1', {port})\")"
    )


def test_the_same_refusal_from_every_broker_is_one_part() -> None:
    message = "no broker answered: " + "; ".join(refused(p) for p in (9092, 9093, 9094))
    assert collapse_error(message) == (
        "no broker answered: cannot connect to broker at …: cannot connect to …: "
        'ConnectionRefusedError(111, "Connect call failed …") '
        "(3 times: 127.0.0.1:9092, 127.0.0.1:9093, 127.0.0.1:9094)"
    )


def test_different_causes_stay_apart_in_the_order_first_seen() -> None:
    message = f"{refused(1)}; timed out after 5 s; {refused(2)}"
    collapsed = collapse_error(message)
    assert collapsed.endswith("(2 times: 127.0.0.1:1, 127.0.0.1:2); timed out after 5 s")
    assert collapsed.count("ConnectionRefusedError") == 1


def test_repeats_without_addresses_are_counted() -> None:
    assert collapse_error("ZooKeeper: ConnectionLoss; ZooKeeper: ConnectionLoss") == (
        "ZooKeeper: ConnectionLoss (2 times)"
    )


def test_ipv6_addresses_are_kept_whole() -> None:
    message = "no broker answered: refused [::1]:9092; refused [::1]:9093"
    assert (
        collapse_error(message) == "no broker answered: refused … (2 times: [::1]:9092, [::1]:9093)"
    )


def test_a_single_error_is_unchanged() -> None:
    assert collapse_error("ZooKeeper: ConnectionLoss") == "ZooKeeper: ConnectionLoss"
