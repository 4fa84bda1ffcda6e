"""The one dispatch both listeners run: the loop from a frame to its answer.

For every frame: the fixed header (api key, version, correlation id) is checked against
the connection's phase and the dialect's registry (brokerd/serving/connection_state.py);
then the header is read, the body decoded, the handler called and its answer encoded.
A handler that returns a Deferred (an acks=all produce, once appended) gets an Answer
whose `later` task finishes it; the server writes it in its turn
(brokerd/serving/answer_order.py).
What differs between replog's protocol and Kafka's is the Dialect: how a header and a
body are read, how an answer is written, and how each refusal looks on its wire (replog
answers every refusal with a header-only error; Kafka's clients get UNSUPPORTED_VERSION
or a closed connection). The loop itself is written once, here.

Every error answered is counted here, once for both dialects, under its API and Kafka
error name (brokerd/metrics/registry.py, RequestErrors): the codes a response carries
(response_errors.py finds them in either dialect's layout), a handler's typed failure,
an unsupported version and a body that does not decode; a refused login step is counted
by the Logins both dialects share (brokerd/serving/server.py). A request refused before
login is logged, not counted: its API is whatever an unauthenticated client claims.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from brokerd.core.deferred import Deferred
from brokerd.core.produce import UnansweredProduceFailed
from brokerd.metrics import RequestErrors
from brokerd.serving.answer import CLOSE, Answer
from brokerd.serving.connection_state import SASL_STEPS, Admission, Phase, admission
from brokerd.serving.response_errors import error_codes
from brokerd.serving.server import FIXED_HEADER_BYTES, Connection, Logins
from spark_replica.errors import (
    InvalidRequestError,
    ProtocolError,
    UnsupportedVersionError,
    code_of,
)
from spark_replica.transport import Frame, OversizedFrame
from spark_replica.wire.primitives import Chunk, Reader
from spark_replica.wire.request_header import RequestHeader

logger = logging.getLogger("brokerd.server")

_FIXED_HEADER = struct.Struct(">hhi")


class Dialect(Protocol):
    """One protocol's side of the dispatch: its registry's versions, its codecs, its
    handlers and the answers it gives to what it will not serve."""

    @property
    def versions(self) -> Mapping[int, tuple[int, int]]:
        """api key -> (lowest, highest) version served, from the dialect's registry."""
        ...

    def read_header(self, reader: Reader) -> RequestHeader:
        """The request header; ProtocolError when it cannot be read (the close)."""
        ...

    def decode(self, header: RequestHeader, reader: Reader) -> Any:
        """The request body; ProtocolError when it does not decode."""
        ...

    async def login(self, connection: Connection, header: RequestHeader, body: Any) -> Answer:
        """One step of the SASL exchange (handshake or authenticate)."""
        ...

    async def serve(self, connection: Connection, header: RequestHeader, body: Any) -> Any:
        """The registered handler's response (None: none is sent)."""
        ...

    def encode(self, header: RequestHeader, response: Any) -> Answer: ...

    def refuse(self, connection: Connection, phase: Phase, header: tuple[int, int, int]) -> Answer:
        """The answer to a request its phase does not admit, from the fixed header
        (api key, version, correlation id) alone; the connection closes after it."""
        ...

    def unsupported(self, connection: Connection, header: RequestHeader) -> Answer: ...

    def malformed(
        self, connection: Connection, header: RequestHeader, exc: ProtocolError
    ) -> Answer:
        """The answer to a body that does not decode."""
        ...

    def failed(
        self, connection: Connection, header: RequestHeader, body: Any, exc: Exception
    ) -> Answer:
        """The answer to a handler that raised."""
        ...

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> Sequence[Chunk] | None: ...


class Dispatch:
    """A listener's dispatch: the one loop, driven by its dialect."""

    def __init__(self, dialect: Dialect, logins: Logins, errors: RequestErrors) -> None:
        self.dialect = dialect
        self.logins = logins
        self.errors = errors

    def oversized_answer(self, frame: OversizedFrame, limit: int) -> Sequence[Chunk] | None:
        return self.dialect.oversized_answer(frame, limit)

    async def handle(self, connection: Connection, frame: Frame) -> Answer:
        """Answer one frame; raise ProtocolError when its header cannot be read."""
        if len(frame) < FIXED_HEADER_BYTES:
            raise ProtocolError(f"a request of {len(frame)} bytes has no header")
        dialect = self.dialect
        fixed = _FIXED_HEADER.unpack_from(frame)
        phase = connection.phase
        verdict = admission(phase, fixed[0], fixed[1], dialect.versions)
        if verdict is Admission.REFUSE:
            logger.info(
                "closing connection from %s: api key %d %s", connection.ip, fixed[0], phase.value
            )
            return dialect.refuse(connection, phase, fixed)
        reader = Reader(frame)
        header = dialect.read_header(reader)
        if verdict is Admission.UNSUPPORTED:
            self.errors.count(header.api_key, UnsupportedVersionError.code)
            return dialect.unsupported(connection, header)
        try:
            body = dialect.decode(header, reader)
        except ProtocolError as exc:
            self.errors.count(header.api_key, InvalidRequestError.code)
            return dialect.malformed(connection, header, exc)
        if header.api_key in SASL_STEPS:
            return await dialect.login(connection, header, body)
        try:
            response = await dialect.serve(connection, header, body)
        except UnansweredProduceFailed as exc:
            logger.info("closing connection from %s: %s", connection.ip, exc)
            return CLOSE
        except Exception as exc:
            self.errors.count(header.api_key, code_of(exc))
            return dialect.failed(connection, header, body, exc)
        if isinstance(response, Deferred):
            rest = self._rest(connection, header, body, response)
            return Answer(None, later=asyncio.ensure_future(rest))
        return self._encoded(header, response)

    async def _rest(
        self, connection: Connection, header: RequestHeader, body: Any, deferred: Deferred
    ) -> Answer:
        """A deferred response's answer, once its wait is over; failures answered as the
        handler's own would have been."""
        try:
            response = await deferred.rest
        except Exception as exc:
            self.errors.count(header.api_key, code_of(exc))
            return self.dialect.failed(connection, header, body, exc)
        return self._encoded(header, response)

    def _encoded(self, header: RequestHeader, response: Any) -> Answer:
        """A handler's response on the wire (None: nothing is sent), its errors counted."""
        if response is None:
            return Answer(None)
        for code in error_codes(response):
            self.errors.count(header.api_key, code)
        return self.dialect.encode(header, response)
