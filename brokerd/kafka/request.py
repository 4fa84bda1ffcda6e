"""One decoded request of the Kafka listener, as its handler sees it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from brokerd.core.context import BrokerContext


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    """The header's facts beside the body: handlers need the version to choose a
    response shape, and group handlers record the client id and host of each member."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    principal: str
    body: Any


# Answers the request's response body, or None when no response is sent (acks=0).
KafkaHandler = Callable[["BrokerContext", KafkaRequest], Awaitable[Any | None]]
