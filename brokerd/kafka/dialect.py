"""Kafka's protocol as a dialect of the one dispatch (brokerd/serving/dispatch.py):
headers and bodies read with the Kafka tables, handlers from its registry
(brokerd/kafka/registry.py), and the answers Kafka's clients expect to what is not served.

What cannot be served is answered the way Kafka's clients expect, never with a crash
or a hang:

- ApiVersions is answered from the registry: the versions the tables serve and the
  handlers implement, so a client negotiates exactly what exists. A version above the
  highest served gets the v0 layout with UNSUPPORTED_VERSION and the list (KIP-511),
  from which the client picks a version it shares.
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
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.kafka.registry import kafka_registry
from brokerd.kafka.request import KafkaRequest
from brokerd.serving.answer import CLOSE, Answer
from brokerd.serving.authentication import SaslSession
from brokerd.serving.connection_state import API_VERSIONS, SASL_HANDSHAKE, Phase
from brokerd.serving.server import Connection, LoginRefused, Logins
from brokerd.transactions.coordinator import TransactionCoordinator
from spark_replica.errors import (
    IllegalSaslStateError,
    ProtocolError,
    UnsupportedVersionError,
    code_of,
    wire_message,
)
from spark_replica.transport import OversizedFrame
from spark_replica.wire.kafka.headers import encode_response, read_request_header
from spark_replica.wire.kafka.versions import REQUESTS
from spark_replica.wire.primitives import Buffer, Reader
from spark_replica.wire.request_header import RequestHeader
from spark_replica.wire.schema import Data

logger = logging.getLogger("brokerd.kafka")

_UNSUPPORTED = struct.Struct(">iih")  # size, correlation id, error code


def unsupported_answer(correlation_id: int) -> list[Buffer]:
    """The correlation id and UNSUPPORTED_VERSION: the start every response layout shares."""
    return [_UNSUPPORTED.pack(6, correlation_id, UnsupportedVersionError.code)]


class KafkaDialect:
    """Kafka's protocol for the one dispatch: what is not served closes the connection,
    after UNSUPPORTED_VERSION when the client can read it."""

    def __init__(
        self,
        ctx: BrokerContext,
        logins: Logins,
        groups: GroupCoordinator | None,
        transactions: TransactionCoordinator | None,
    ) -> None:
        self.ctx = ctx
        self.logins = logins
        registry = kafka_registry(groups, transactions)
        self.handlers = registry.handlers
        self.versions = registry.versions
        self._api_keys = registry.api_keys

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> None:
        return None

    def refuse(self, connection: Connection, phase: Phase, header: tuple[int, int, int]) -> Answer:
        return CLOSE

    def read_header(self, reader: Reader) -> RequestHeader:
        return read_request_header(reader)

    def unsupported(self, connection: Connection, header: RequestHeader) -> Answer:
        key, version, correlation_id = header.api_key, header.api_version, header.correlation_id
        if key == API_VERSIONS:
            if version < 0:
                logger.warning("closing connection: ApiVersions version %d has no layout", version)
                return CLOSE
            body = Data(error_code=UnsupportedVersionError.code, api_keys=self._api_keys)
            return self._encode(API_VERSIONS, 0, correlation_id, body)
        logger.info(
            "closing connection from %s: api key %d version %d is not served",
            connection.ip,
            key,
            version,
        )
        return Answer(unsupported_answer(correlation_id), 0.0)

    def decode(self, header: RequestHeader, reader: Reader) -> Any:
        return REQUESTS[header.api_key].decode(header.api_version, reader)

    def malformed(
        self, connection: Connection, header: RequestHeader, exc: ProtocolError
    ) -> Answer:
        logger.warning(
            "closing connection from %s: malformed request (api key %d version %d): %s",
            connection.ip,
            header.api_key,
            header.api_version,
            exc,
        )
        return CLOSE

    async def serve(self, connection: Connection, header: RequestHeader, body: Any) -> Any:
        key = header.api_key
        request = KafkaRequest(
            key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            connection.ip,
            connection.principal,
            body,
        )
        return await self.handlers[key](self.ctx, request)

    def failed(
        self, connection: Connection, header: RequestHeader, body: Any, exc: Exception
    ) -> Answer:
        logger.error(
            "closing connection from %s: api key %d failed",
            connection.ip,
            header.api_key,
            exc_info=exc,
        )
        return CLOSE

    def encode(self, header: RequestHeader, response: Any) -> Answer:
        return self._encode(header.api_key, header.api_version, header.correlation_id, response)

    async def login(self, connection: Connection, header: RequestHeader, body: Any) -> Answer:
        key, version, correlation_id = header.api_key, header.api_version, header.correlation_id
        if connection.sasl is None:
            error = IllegalSaslStateError("this listener does not use SASL")
            answer = _sasl_error(key, error)
            return Answer(encode_response(key, version, correlation_id, answer), 0.0)
        try:
            if key == SASL_HANDSHAKE:
                mechanisms = await self.logins.step(
                    connection, key, partial(SaslSession.handshake, mechanism=body.mechanism)
                )
            else:
                token = await self.logins.step(
                    connection,
                    key,
                    partial(SaslSession.authenticate, token=bytes(body.auth_bytes)),
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
