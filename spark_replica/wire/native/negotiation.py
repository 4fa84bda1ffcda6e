"""Which version of each API a client sends to one broker: the highest both sides know.

As Kafka's clients do, a client asks each broker which versions it serves (ApiVersions,
sent at version 0, which every replog broker serves) before anything else on a
connection, and from then on sends each request at the highest version that both the
broker serves and this build tables. So in a rolling upgrade a new client speaks
version 0 to an old broker, and an old client's version 0 is still served by a new one.
A broker that answers ApiVersions with an error is taken to serve version 0 of every
API, the one version every build has.

A request whose values need a later version than the broker serves (a read_committed
Fetch to a broker serving Fetch v0 only) is refused here with UnsupportedVersionError,
never sent at a version that would silently drop them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_replica.errors import UnsupportedVersionError
from spark_replica.wire.native.api_versions import ApiVersionsResponse
from spark_replica.wire.native.apis import SUPPORTED_VERSIONS, ApiKey

# The version of ApiVersions a client opens with: the one every broker answers.
OPENING_VERSION = 0


@dataclass(frozen=True, slots=True)
class BrokerVersions:
    """What one broker serves: api key -> (lowest, highest) version, or None when the
    broker did not say (version 0 of everything)."""

    served: Mapping[int, tuple[int, int]] | None

    @classmethod
    def from_answer(cls, response: ApiVersionsResponse) -> BrokerVersions:
        return cls({r.api_key: (r.min_version, r.max_version) for r in response.versions})

    @classmethod
    def version_zero_only(cls) -> BrokerVersions:
        return cls(None)

    def version_for(self, api_key: int, ours: tuple[int, int], needed: int, name: str) -> int:
        """The version to send `name` (api key `api_key`) at: the highest in both `ours`
        and the broker's range, and at least `needed`; else UnsupportedVersionError."""
        theirs = (0, 0) if self.served is None else self.served.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(f"the broker does not serve {name}")
        low = max(ours[0], theirs[0], needed)
        high = min(ours[1], theirs[1])
        if low > high:
            raise UnsupportedVersionError(
                f"{name}: no version both sides serve (this client sends {ours[0]} to "
                f"{ours[1]}, this request needs {needed} or later; the broker serves "
                f"{theirs[0]} to {theirs[1]}): upgrade the older side"
            )
        return high


def request_version(broker: BrokerVersions, request: Any) -> int:
    """The version a request (a native message with API_KEY and lowest_version) goes out
    at to `broker`; ApiVersions itself always at the opening version."""
    try:
        api_key = ApiKey(request.API_KEY)
    except ValueError:
        raise UnsupportedVersionError(
            f"api key {request.API_KEY} is not one of replog's: no broker serves it"
        ) from None
    if api_key == ApiKey.API_VERSIONS:
        return OPENING_VERSION
    return broker.version_for(
        int(api_key), SUPPORTED_VERSIONS[api_key], request.lowest_version(), api_key.name
    )
