"""What a connection may send before it has logged in: one table for both listeners.

Everything that decides what an unauthenticated client can make the broker do lives
here, and nothing else decides it. The server (brokerd/serving/server.py) reads only the fixed
start of each frame, api key, version and correlation id, which both protocols share,
and asks `admits` before a dispatch decodes anything; a frame that is not admitted is
refused by its dispatch from those three numbers alone (Kafka: the connection closes;
replog: one header-only error, then the close), so its body is never decoded. The size
limits and the deadline of each phase are here too: the transport refuses a larger frame
from its size prefix alone, and the idle sweep closes a connection that has not logged
in by its deadline (brokerd/serving/connection_limits.py).

| phase        | decoded                                      | largest frame | deadline |
|--------------|----------------------------------------------|---------------|----------|
| TLS_REQUIRED | nothing (one answer saying TLS is required)  | before login  | login    |
| BEFORE_LOGIN | ApiVersions, SaslHandshake, SaslAuthenticate | before login  | login    |
| SERVING      | every API the dispatch serves                | any request   | none     |
| CLOSING      | nothing (an answer that ends it was sent)    | before login  | none     |

"before login" is sasl.server.max.receive.size, "any request" socket.request.max.bytes,
"login" sasl.server.authentication.timeout.ms from the accept. The largest frame is also
the most of the shared request budget one connection may hold at once.

Versions come from the listener's API registry (api key -> lowest and highest version
served): `admission` says, from the fixed header alone, whether a request is decoded,
refused for its phase, or answered as an unsupported API or version
(brokerd/serving/dispatch.py turns each verdict into the dialect's answer).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey


class Phase(enum.Enum):
    TLS_REQUIRED = "plaintext on a TLS listener"
    BEFORE_LOGIN = "before SASL authentication"
    SERVING = "serving"  # a listener without SASL, or a connection that has logged in
    CLOSING = "closing"  # answered with a refusal that ends the connection


class Admission(enum.Enum):
    """What the dispatch does with a request, decided before its body is read."""

    DECODE = "decode"
    REFUSE = "not admitted in this phase"  # the dialect's refusal, then the close
    UNSUPPORTED = "unsupported api key or version"  # the dialect's unsupported answer


# The login's api keys, the same numbers in both protocols.
API_VERSIONS = int(ApiKey.API_VERSIONS)
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
# The SASL exchange and the version negotiation that precedes it: Kafka's list.
LOGIN_APIS = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

# The two steps of the SASL exchange, which the dialect's login answers.
SASL_STEPS = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})

# phase -> the api keys whose requests are decoded (None: every one the dispatch serves)
ADMITTED: dict[Phase, frozenset[int] | None] = {
    Phase.TLS_REQUIRED: frozenset(),
    Phase.BEFORE_LOGIN: LOGIN_APIS,
    Phase.SERVING: None,
    Phase.CLOSING: frozenset(),
}


def phase_of(
    plaintext_on_tls: bool, uses_sasl: bool, logged_in: bool, closing: bool = False
) -> Phase:
    if closing:
        return Phase.CLOSING
    if plaintext_on_tls:
        return Phase.TLS_REQUIRED
    if uses_sasl and not logged_in:
        return Phase.BEFORE_LOGIN
    return Phase.SERVING


def admits(phase: Phase, api_key: int) -> bool:
    """Whether a request with this api key may be decoded in this phase."""
    admitted = ADMITTED[phase]
    return admitted is None or api_key in admitted


def admission(
    phase: Phase, api_key: int, version: int, served: Mapping[int, tuple[int, int]]
) -> Admission:
    """What to do with a request in this phase, given the versions the listener serves
    (api key -> lowest, highest): its phase is checked first, so that a connection that
    has not logged in learns nothing of what the listener serves."""
    admitted = ADMITTED[phase]
    if admitted is not None and api_key not in admitted:
        return Admission.REFUSE
    versions = served.get(api_key)
    if versions is None or not versions[0] <= version <= versions[1]:
        return Admission.UNSUPPORTED
    return Admission.DECODE


@dataclass(frozen=True)
class PhaseLimits:
    """The size limits and the login deadline that depend on the phase."""

    max_frame_bytes: int  # socket.request.max.bytes
    max_receive_before_login: int  # sasl.server.max.receive.size
    login_timeout_ms: int  # sasl.server.authentication.timeout.ms

    def frame_bytes(self, phase: Phase) -> int:
        """The largest frame read in this phase; also the most of the shared request
        budget one connection may hold, so that no one client holds all of it."""
        if phase is Phase.SERVING:
            return self.max_frame_bytes
        return min(self.max_receive_before_login, self.max_frame_bytes)

    def login_deadline_s(self, phase: Phase, accepted_s: float) -> float | None:
        """When a connection accepted at `accepted_s` must have logged in (None: never)."""
        if phase is Phase.SERVING or phase is Phase.CLOSING:
            return None
        return accepted_s + self.login_timeout_ms / 1000
