"""Kafka's protocol on a listener: headers read, versions checked, handlers called.

What cannot be served is answered the way Kafka's clients expect, never with a crash
or a hang:

- ApiVersions is answered here, from the versions the tables serve and the handlers
  implement, so a client negotiates exactly what exists. A version above the highest
  served gets the v0 layout with UNSUPPORTED_VERSION and the list (KIP-511), from
  which the client picks a version it shares.
- Any other API or version not served: the correlation id and UNSUPPORTED_VERSION (35),
  the one answer every response layout starts with, then the connection closes (there
  is no layout to say more in).
- A body that does not decode, a handler that fails unexpectedly, a response that
  cannot be encoded: logged, and the connection closed. Kafka's clients reconnect.
- A frame over the size limit is not answered (Kafka closes such connections too).
- An acks=0 produce that fails for any partition closes the connection (Kafka's way of
  telling a client that reads no answer; it then refreshes its metadata).

Security: what may come before login is the server's one table
(brokerd/serving/connection_state.py):
on a SASL listener only ApiVersions, SaslHandshake and SaslAuthenticate are decoded
before the login, and anything else closes the connection unread, as Kafka does; so does
plaintext on a TLS listener (the client reports a broken connection; there is no Kafka
answer that would explain more). The SASL exchange itself is the replog listener's
(Logins): the same users, mechanisms and failure delays. Authorization is per resource,
inside each handler (brokerd/core/authorization.py).
"""

from __future__ import annotations

import logging
import struct
from functools import partial
from typing import Any

from brokerd.core.context import BrokerContext
from brokerd.core.produce import UnansweredProduceFailed
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.kafka.groups import group_handlers
from brokerd.kafka.registry import DATA_HANDLERS
from brokerd.kafka.request import KafkaHandler, KafkaRequest
from brokerd.serving.authentication import SaslSession
from brokerd.serving.connection_state import Phase
from brokerd.serving.server import CLOSE, Answer, Connection, LoginRefused, Logins
from spark_replica.errors import (
    IllegalSaslStateError,
    ProtocolError,
    UnsupportedVersionError,
    code_of,
    wire_message,
)
from spark_replica.transport import Frame, OversizedFrame
from spark_replica.wire.kafka.headers import encode_response, read_request_header
from spark_replica.wire.kafka.versions import REQUESTS, SERVED
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Buffer, Reader
from spark_replica.wire.schema import Data

logger = logging.getLogger("brokerd.kafka")

API_VERSIONS = int(ApiKey.API_VERSIONS)
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
# Answered by the dispatch itself rather than a handler.
OWN_APIS = (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE)
_UNSUPPORTED = struct.Struct(">iih")  # size, correlation id, error code


def served_versions(handlers: dict[int, KafkaHandler]) -> dict[int, tuple[int, int]]:
    """What ApiVersions advertises: the tabled versions of the APIs with a handler."""
    return {
        key: versions
        for key, versions in sorted(SERVED.items())
        if key in handlers or key in OWN_APIS
    }


def unsupported_answer(correlation_id: int) -> list[Buffer]:
    """The correlation id and UNSUPPORTED_VERSION: the start every response layout shares."""
    return [_UNSUPPORTED.pack(6, correlation_id, UnsupportedVersionError.code)]


class KafkaDispatch:
    def __init__(
        self,
        ctx: BrokerContext,
        logins: Logins,
        groups: GroupCoordinator | None,
    ) -> None:
        self.ctx = ctx
        self.logins = logins
        self.handlers: dict[int, KafkaHandler] = {**DATA_HANDLERS, **group_handlers(groups)}
        self.versions = served_versions(self.handlers)

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> None:
        return None

    def refuse(
        self, connection: Connection, phase: Phase, api_key: int, correlation_id: int
    ) -> Answer:
        return CLOSE

    async def handle(self, connection: Connection, frame: Frame) -> Answer:
        reader = Reader(frame)
        header = read_request_header(reader)
        key, version, correlation_id = header.api_key, header.api_version, header.correlation_id
        if key == API_VERSIONS:
            return self._api_versions(version, correlation_id, reader)
        versions = self.versions.get(key)
        if versions is None or not versions[0] <= version <= versions[1]:
            logger.info(
                "closing connection from %s: api key %d version %d is not served",
                connection.ip,
                key,
                version,
            )
            return Answer(unsupported_answer(correlation_id), 0.0)
        try:
            body = REQUESTS[key].decode(version, reader)
        except ProtocolError as exc:
            logger.warning(
                "closing connection from %s: malformed request (api key %d version %d): %s",
                connection.ip,
                key,
                version,
                exc,
            )
            return CLOSE
        if key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return await self._authenticate(connection, key, version, correlation_id, body)
        request = KafkaRequest(
            key,
            version,
            correlation_id,
            header.client_id,
            connection.ip,
            connection.principal,
            body,
        )
        try:
            response = await self.handlers[key](self.ctx, request)
        except UnansweredProduceFailed as exc:
            logger.info("closing connection from %s: %s", connection.ip, exc)
            return CLOSE
        except Exception:
            logger.exception("closing connection from %s: api key %d failed", connection.ip, key)
            return CLOSE
        if response is None:
            return Answer(None)
        return self._encode(key, version, correlation_id, response)

    def _api_versions(self, version: int, correlation_id: int, reader: Reader) -> Answer:
        highest = self.versions[API_VERSIONS][1]
        api_keys = [
            Data(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in self.versions.items()
        ]
        if version > highest:
            body = Data(error_code=UnsupportedVersionError.code, api_keys=api_keys)
            return self._encode(API_VERSIONS, 0, correlation_id, body)
        try:
            REQUESTS[API_VERSIONS].decode(version, reader)
        except ProtocolError as exc:
            logger.warning("closing connection: malformed ApiVersions request: %s", exc)
            return CLOSE
        body = Data(error_code=0, api_keys=api_keys, throttle_time_ms=0)
        return self._encode(API_VERSIONS, version, correlation_id, body)

    async def _authenticate(
        self, connection: Connection, key: int, version: int, correlation_id: int, body: Any
    ) -> Answer:
        if connection.sasl is None:
            error = IllegalSaslStateError("this listener does not use SASL")
            answer = _sasl_error(key, error)
            return Answer(encode_response(key, version, correlation_id, answer), 0.0)
        try:
            if key == SASL_HANDSHAKE:
                mechanisms = await self.logins.step(
                    connection, partial(SaslSession.handshake, mechanism=body.mechanism)
                )
            else:
                token = await self.logins.step(
                    connection, partial(SaslSession.authenticate, token=bytes(body.auth_bytes))
                )
        except LoginRefused as refused:
            answer = _sasl_error(key, refused.error)
            if key == SASL_HANDSHAKE:
                answer.mechanisms = list(self.ctx.config.security.enabled_mechanisms)
            return Answer(
                encode_response(key, version, correlation_id, answer), refused.close_after_s
            )
        if key == SASL_HANDSHAKE:
            answer = Data(error_code=0, mechanisms=mechanisms)
        else:
            answer = Data(
                error_code=0,
                error_message=None,
                auth_bytes=token,
                session_lifetime_ms=0,
            )
        return self._encode(key, version, correlation_id, answer)

    def _encode(self, key: int, version: int, correlation_id: int, body: Any) -> Answer:
        try:
            return Answer(encode_response(key, version, correlation_id, body))
        except ProtocolError:
            logger.exception("cannot encode the response to api key %d version %d", key, version)
            return CLOSE


def _sasl_error(key: int, error: Exception) -> Data:
    if key == SASL_HANDSHAKE:
        return Data(error_code=code_of(error), mechanisms=[])
    return Data(
        error_code=code_of(error),
        error_message=wire_message(error),
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
