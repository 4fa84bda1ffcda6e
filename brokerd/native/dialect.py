"""replog's own protocol as a dialect of the one dispatch (brokerd/serving/dispatch.py):
its frames decoded, checked and handed to the handlers of its registry
(brokerd/native/registry.py).

Every answer starts with a top-level error code (spark_replica/wire/native/frames.py), so
whatever cannot be served (an unknown API or version, a body that does not decode, a
frame over the size limit, plaintext on a TLS listener) is answered with a typed error
every client can read. What may come before login is the server's one table
(brokerd/serving/connection_state.py): a request it does not admit gets a header-only error from
`refuse`, its body never decoded, and the connection closes. With an authorizer every
request is checked against the ACLs before its handler runs
(brokerd/native/authorization.py). A request is decoded, and its answer encoded, at
the version its header names (one the registry serves; version 0 stays what it was).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from brokerd.core.context import BrokerContext
from brokerd.groups.coordinator import GroupCoordinator
from brokerd.native.authorization import check, filter_metadata
from brokerd.native.registry import VERSIONS, native_handlers
from brokerd.serving.answer import CLOSE, Answer
from brokerd.serving.authentication import SaslSession
from brokerd.serving.connection_state import Phase
from brokerd.serving.server import Connection, LoginRefused, Logins
from brokerd.transactions.coordinator import TransactionCoordinator
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
from spark_replica.transport import OversizedFrame
from spark_replica.wire.native import REQUEST_TYPES
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.frames import (
    RequestHeader,
    ResponseHeader,
    encode_response,
)
from spark_replica.wire.native.produce import ACKS_NONE
from spark_replica.wire.primitives import Chunk, Reader, Writer

logger = logging.getLogger("brokerd.server")


class NativeDialect:
    """replog's protocol for the one dispatch (brokerd/serving/dispatch.py): its own
    request types, and a header-only error for every refusal."""

    versions = VERSIONS

    def __init__(
        self,
        ctx: BrokerContext,
        logins: Logins,
        groups: GroupCoordinator | None,
        transactions: TransactionCoordinator | None,
    ) -> None:
        self.ctx = ctx
        self.logins = logins
        self.handlers = native_handlers(groups, transactions)

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> list[Chunk]:
        header = Reader(frame.head)
        header.int16()
        header.int16()
        error = MessageTooLargeError(f"request of {frame.size} bytes is over the limit of {limit}")
        return _error_response(header.int32(), error)

    def refuse(self, connection: Connection, phase: Phase, header: tuple[int, int, int]) -> Answer:
        protocol = self.ctx.config.security.protocol
        error: BrokerResponseError
        if phase is Phase.TLS_REQUIRED:
            error = SaslAuthenticationFailedError(
                f"this listener requires TLS ({protocol}): the client connected "
                "in plaintext; set security.protocol to SSL or SASL_SSL"
            )
        else:
            error = IllegalSaslStateError(
                f"{_api_name(header[0])} before authentication: this listener requires SASL "
                f"({protocol}); set security.protocol and the SASL settings"
            )
        return Answer(_error_response(header[2], error), 0.0)

    def read_header(self, reader: Reader) -> RequestHeader:
        return RequestHeader.read(reader)

    def unsupported(self, connection: Connection, header: RequestHeader) -> Answer:
        error = UnsupportedVersionError(
            f"api key {header.api_key} version {header.api_version} is not supported"
        )
        return Answer(_error_response(header.correlation_id, error))

    def decode(self, header: RequestHeader, reader: Reader) -> Any:
        request = REQUEST_TYPES[ApiKey(header.api_key)].read(reader, header.api_version)
        reader.expect_end()
        return request

    def malformed(
        self, connection: Connection, header: RequestHeader, exc: ProtocolError
    ) -> Answer:
        error = InvalidRequestError(f"malformed {ApiKey(header.api_key).name} request: {exc}")
        return Answer(_error_response(header.correlation_id, error))

    async def login(self, connection: Connection, header: RequestHeader, body: Any) -> Answer:
        api_key = ApiKey(header.api_key)
        correlation_id = header.correlation_id
        if connection.sasl is None:
            error = IllegalSaslStateError(f"{api_key.name}: this listener does not use SASL")
            return Answer(_error_response(correlation_id, error))
        try:
            response = await self.logins.step(
                connection, api_key, partial(SaslSession.handle, api_key=api_key, request=body)
            )
        except LoginRefused as refused:
            return Answer(_error_response(correlation_id, refused.error), refused.close_after_s)
        return self.encode(header, response)

    async def serve(self, connection: Connection, header: RequestHeader, body: Any) -> Any:
        api_key = header.api_key
        authorizer = self.ctx.authorizer
        if authorizer is None:
            return await self.handlers[api_key](self.ctx, body)
        check(authorizer, connection.principal, connection.ip, ApiKey(api_key), body)
        response = await self.handlers[api_key](self.ctx, body)
        if api_key == ApiKey.METADATA and response is not None:
            response = filter_metadata(
                authorizer, connection.principal, connection.ip, response, body.topics is None
            )
        return response

    def failed(
        self, connection: Connection, header: RequestHeader, body: Any, exc: Exception
    ) -> Answer:
        api_key = ApiKey(header.api_key)
        if not isinstance(exc, BrokerResponseError):
            logger.error("%s request failed", api_key.name, exc_info=exc)
            exc = UnknownServerError(repr(exc))
        elif api_key == ApiKey.PRODUCE and body.acks == ACKS_NONE:
            # No answer is read: closing is the only way to say it was refused.
            logger.info(
                "closing connection from %s: acks=0 produce refused: %s", connection.ip, exc
            )
            return CLOSE
        return Answer(_error_response(header.correlation_id, exc))

    def encode(self, header: RequestHeader, response: Any) -> Answer:
        body = Writer()
        try:
            response.write(body, header.api_version)
        except ProtocolError as exc:
            logger.exception("cannot encode the %s response", ApiKey(header.api_key).name)
            return Answer(_error_response(header.correlation_id, UnknownServerError(str(exc))))
        return Answer(encode_response(ResponseHeader(header.correlation_id, 0, None), body))


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


def _error_response(correlation_id: int, error: BrokerResponseError) -> list[Chunk]:
    return encode_response(ResponseHeader(correlation_id, error.code, wire_message(error)), None)
