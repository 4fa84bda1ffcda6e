"""replog's own protocol on a listener: its frames decoded, checked and handed to the
handlers of brokerd/native.

Every answer starts with a top-level error code (spark_replica/wire/native/frames.py), so
whatever cannot be served (an unknown API or version, a body that does not decode, a
frame over the size limit, plaintext on a TLS listener) is answered with a typed error
every client can read. What may come before login is the server's one table
(brokerd/serving/connection_state.py): a request it does not admit gets a header-only error from
`refuse`, its body never decoded, and the connection closes. With an authorizer every
request is checked against the ACLs before its handler runs
(brokerd/native/authorization.py).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from brokerd.core.context import BrokerContext
from brokerd.core.produce import UnansweredProduceFailed
from brokerd.native.authorization import check, filter_metadata
from brokerd.native.registry import HANDLERS
from brokerd.serving.authentication import SaslSession
from brokerd.serving.connection_state import Phase
from brokerd.serving.server import CLOSE, Answer, Connection, LoginRefused, Logins
from spark_replica.errors import (
    BrokerResponseError,
    IllegalSaslStateError,
    InvalidRequestError,
    MessageTooLargeError,
    ProtocolError,
    SaslAuthenticationFailedError,
    UnknownServerError,
    UnsupportedVersionError,
    wire_message,
)
from spark_replica.transport import Frame, OversizedFrame
from spark_replica.wire.native import REQUEST_TYPES, is_supported
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.frames import (
    Buffer,
    RequestHeader,
    ResponseHeader,
    encode_response,
)
from spark_replica.wire.native.produce import ACKS_NONE
from spark_replica.wire.primitives import Reader, Writer

logger = logging.getLogger("brokerd.server")


class ReplogDispatch:
    def __init__(self, ctx: BrokerContext, logins: Logins) -> None:
        self.ctx = ctx
        self.logins = logins

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> list[Buffer]:
        header = Reader(frame.head)
        header.int16()
        header.int16()
        error = MessageTooLargeError(f"request of {frame.size} bytes is over the limit of {limit}")
        return _error_response(header.int32(), error)

    def refuse(
        self, connection: Connection, phase: Phase, api_key: int, correlation_id: int
    ) -> Answer:
        protocol = self.ctx.config.security.protocol
        error: BrokerResponseError
        if phase is Phase.TLS_REQUIRED:
            error = SaslAuthenticationFailedError(
                f"this listener requires TLS ({protocol}): the client connected "
                "in plaintext; set security.protocol to SSL or SASL_SSL"
            )
        else:
            error = IllegalSaslStateError(
                f"{_api_name(api_key)} before authentication: this listener requires SASL "
                f"({protocol}); set security.protocol and the SASL settings"
            )
        return Answer(_error_response(correlation_id, error), 0.0)

    async def handle(self, connection: Connection, frame: Frame) -> Answer:
        reader = Reader(frame)
        header = RequestHeader.read(reader)
        correlation_id = header.correlation_id
        error: BrokerResponseError
        if not is_supported(header.api_key, header.api_version):
            error = UnsupportedVersionError(
                f"api key {header.api_key} version {header.api_version} is not supported"
            )
            return Answer(_error_response(correlation_id, error))
        api_key = ApiKey(header.api_key)
        try:
            request = REQUEST_TYPES[api_key].read(reader)
            reader.expect_end()
        except ProtocolError as exc:
            error = InvalidRequestError(f"malformed {api_key.name} request: {exc}")
            return Answer(_error_response(correlation_id, error))
        sasl = connection.sasl
        if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            if sasl is None:
                error = IllegalSaslStateError(f"{api_key.name}: this listener does not use SASL")
                return Answer(_error_response(correlation_id, error))
            try:
                response = await self.logins.step(
                    connection, partial(SaslSession.handle, api_key=api_key, request=request)
                )
            except LoginRefused as refused:
                return Answer(_error_response(correlation_id, refused.error), refused.close_after_s)
            return Answer(_encode(api_key, correlation_id, response))
        return await self._serve(connection, api_key, request, correlation_id)

    async def _serve(
        self, connection: Connection, api_key: ApiKey, request: Any, correlation_id: int
    ) -> Answer:
        authorizer = self.ctx.authorizer
        try:
            if authorizer is not None:
                check(authorizer, connection.principal, connection.ip, api_key, request)
            response = await HANDLERS[api_key](self.ctx, request)
        except UnansweredProduceFailed as exc:
            logger.info("closing connection from %s: %s", connection.ip, exc)
            return CLOSE
        except BrokerResponseError as exc:
            if api_key == ApiKey.PRODUCE and request.acks == ACKS_NONE:
                # No answer is read: closing is the only way to say it was refused.
                logger.info(
                    "closing connection from %s: acks=0 produce refused: %s", connection.ip, exc
                )
                return CLOSE
            return Answer(_error_response(correlation_id, exc))
        except Exception as exc:
            logger.exception("%s request failed", api_key.name)
            return Answer(_error_response(correlation_id, UnknownServerError(repr(exc))))
        if response is None:
            return Answer(None)
        if authorizer is not None and api_key == ApiKey.METADATA:
            response = filter_metadata(
                authorizer, connection.principal, connection.ip, response, request.topics is None
            )
        return Answer(_encode(api_key, correlation_id, response))


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


def _encode(api_key: ApiKey, correlation_id: int, response: Any) -> list[Buffer]:
    body = Writer()
    try:
        response.write(body)
    except ProtocolError as exc:
        logger.exception("cannot encode the %s response", api_key.name)
        return _error_response(correlation_id, UnknownServerError(str(exc)))
    return encode_response(ResponseHeader(correlation_id, 0, None), body)


def _error_response(correlation_id: int, error: BrokerResponseError) -> list[Buffer]:
    return encode_response(ResponseHeader(correlation_id, error.code, wire_message(error)), None)
