"""Ports picked for listeners stay out of the range the kernel gives outgoing connections,
so that no connection can take one between its picking and its binding."""

from __future__ import annotations

import socket

import pytest

from spark_replica.tools.launcher import brokers


def test_picked_ports_are_free_and_below_the_ephemeral_range() -> None:
    first_ephemeral = brokers._first_ephemeral_port()
    for _ in range(50):
        port = brokers.free_port()
        if first_ephemeral > brokers.LOWEST_PICKED_PORT:
            assert brokers.LOWEST_PICKED_PORT <= port < first_ephemeral
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # still free: nothing holds it


def test_without_room_below_the_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brokers, "_first_ephemeral_port", lambda: 0)
    port = brokers.free_port()
    assert 0 < port < 65536
