"""A broker behind a partition drops the client's SYNs: connecting to it neither succeeds
nor is refused. Asking the brokers in turn must give up on it within the request's own
timeout, not the connect timeout, or every broker cut off costs a client 10 s."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from spark_replica.client import Cluster
from spark_replica.errors import ConnectionLostError
from spark_replica.wire.native.metadata import MetadataRequest


@pytest.fixture
def silent_address() -> Iterator[tuple[str, int]]:
    """A port whose accept queue is full: the kernel drops further SYNs, as a cut does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    address = server.getsockname()
    fillers = []
    for _ in range(2):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(address)
        fillers.append(filler)
    time.sleep(0.1)
    try:
        yield address
    finally:
        for filler in fillers:
            filler.close()
        server.close()


def test_a_broker_that_drops_syns_is_given_up_on_within_the_request_timeout(
    silent_address: tuple[str, int],
) -> None:
    async def ask() -> float:
        cluster = Cluster([silent_address])
        started = time.monotonic()
        try:
            with pytest.raises(ConnectionLostError):
                await cluster.send_to_any(MetadataRequest(None), timeout_s=0.5)
            return time.monotonic() - started
        finally:
            await cluster.close()

    assert asyncio.run(ask()) < 3.0
