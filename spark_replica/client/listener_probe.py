"""Which protocol answers on an address: replog's own or Kafka's.

A broker has two listeners on two ports, and people paste one where the other was
meant. Both listeners answer ApiVersions v0 alike (a request header both read, and the
same answer layout: an error code and (api key, min, max) triples), so one request tells
them apart by what they list: the Kafka listener serves the consumer-group membership
APIs (JoinGroup), the replog listener the controller's (LeaderAndIsr) and neither serves
both. (FindCoordinator tells nothing: both serve it, for transactional producers.)
Anything else (no answer, another layout, another service) is UNKNOWN: the caller goes
on as if it had not asked, so a probe never makes a working command fail.

The probe speaks before any SASL login (ApiVersions needs none on Kafka's listeners),
over TLS when the client's settings use it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from spark_replica.errors import ReplogError
from spark_replica.transport import Frame, FrameStream, OversizedFrame, open_frame_stream
from spark_replica.wire.native.api_versions import ApiVersionsRequest, ApiVersionsResponse
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.frames import RequestHeader, ResponseHeader, encode_request
from spark_replica.wire.primitives import Reader, Writer

if TYPE_CHECKING:
    from spark_replica.security.settings import SecurityConfig

logger = logging.getLogger(__name__)

REPLOG = "replog"
KAFKA = "kafka"
UNKNOWN = "unknown"

# Kafka's JoinGroup: only a Kafka listener runs consumer-group membership.
KAFKA_ONLY_API = 11
PROBE_TIMEOUT_S = 5.0
# An ApiVersions answer lists a few dozen APIs; anything much larger is not one.
MAX_ANSWER_BYTES = 64 * 1024
_correlation_ids = itertools.count(0x5EED)


def protocol_of(api_keys: Collection[int]) -> str:
    """REPLOG, KAFKA or UNKNOWN from the API keys a listener says it serves."""
    kafka = KAFKA_ONLY_API in api_keys
    replog = int(ApiKey.LEADER_AND_ISR) in api_keys
    if kafka == replog:
        return UNKNOWN
    return KAFKA if kafka else REPLOG


async def probe_listener(
    host: str,
    port: int,
    security: SecurityConfig | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> str:
    """Ask host:port for its API versions and say whose protocol answered."""
    ssl_context = None if security is None else security.client_ssl_context()
    try:
        stream = await open_frame_stream(host, port, MAX_ANSWER_BYTES, timeout_s, ssl_context)
    except ReplogError as exc:
        logger.debug("probe of %s:%d: cannot connect: %s", host, port, exc)
        return UNKNOWN
    try:
        correlation_id = next(_correlation_ids)
        body = Writer()
        ApiVersionsRequest().write(body)
        header = RequestHeader(int(ApiKey.API_VERSIONS), 0, correlation_id, "replog-probe")
        await stream.write(encode_request(header, body))
        frame = await _read_with_deadline(stream, timeout_s)
        if frame is None or isinstance(frame, OversizedFrame):
            return UNKNOWN
        reader = Reader(frame)
        answered = ResponseHeader.read(reader)
        if answered.correlation_id != correlation_id or answered.error_code:
            return UNKNOWN
        keys = {version.api_key for version in ApiVersionsResponse.read(reader).versions}
    except (ReplogError, ValueError) as exc:
        logger.debug("probe of %s:%d: no ApiVersions answer: %s", host, port, exc)
        return UNKNOWN
    finally:
        stream.close()
    protocol = protocol_of(keys)
    logger.info("%s:%d answers the %s protocol", host, port, protocol)
    return protocol


async def _read_with_deadline(
    stream: FrameStream, timeout_s: float
) -> Frame | OversizedFrame | None:
    try:
        return await asyncio.wait_for(stream.read_frame(), timeout_s)
    except TimeoutError:
        return None
