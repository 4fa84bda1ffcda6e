"""Tables of SaslHandshake and SaslAuthenticate (KIP-152: SASL bytes framed in Kafka
requests, so a Kafka client authenticates the way replog's own client does)."""

from __future__ import annotations

from spark_replica.wire.kafka.messages.layouts import (
    api,
    error,
    error_code,
)
from spark_replica.wire.schema import Field

SASL_HANDSHAKE_REQUEST, SASL_HANDSHAKE_RESPONSE = api(
    "SaslHandshake",
    api_key=17,
    versions=(0, 1),
    flexible=None,
    request=[Field("Mechanism", "string", "0+")],
    response=[
        error_code(),
        Field("Mechanisms", "[]string", "0+"),
    ],
)

SASL_AUTHENTICATE_REQUEST, SASL_AUTHENTICATE_RESPONSE = api(
    "SaslAuthenticate",
    api_key=36,
    versions=(0, 2),
    flexible=2,
    request=[Field("AuthBytes", "bytes", "0+")],
    response=[
        *error(message="0+"),
        Field("AuthBytes", "bytes", "0+"),
        Field("SessionLifetimeMs", "int64", "1+", default=0),
    ],
)

REQUESTS = [SASL_HANDSHAKE_REQUEST, SASL_AUTHENTICATE_REQUEST]
RESPONSES = [SASL_HANDSHAKE_RESPONSE, SASL_AUTHENTICATE_RESPONSE]
