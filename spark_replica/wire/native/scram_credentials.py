"""DescribeUserScramCredentials and AlterUserScramCredentials: SCRAM users through any broker.

Mechanism codes and field meanings are Kafka's; layouts are replog's own.

DescribeUserScramCredentials request: user names (null or empty: every user); response:
per user an error code and message and, per mechanism it has, the mechanism code and
iteration count. Salts and keys never leave the broker.

AlterUserScramCredentials request: deletions (user, mechanism), then upsertions (user,
mechanism, iterations, salt, salted password). The client salts and hashes, so the
password itself never crosses the wire; the salted password is still a secret (it lets
its holder authenticate), so it is kept out of reprs. Response: per user an error code
and message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, struct_array, wire_field
from spark_replica.wire.schema import Tabled, tabled


class ScramMechanismCode(IntEnum):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


# mechanism name (as in sasl.mechanism) <-> its code on the wire
MECHANISM_CODES: dict[str, ScramMechanismCode] = {
    "SCRAM-SHA-256": ScramMechanismCode.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanismCode.SCRAM_SHA_512,
}
MECHANISM_NAMES: dict[int, str] = {code: name for name, code in MECHANISM_CODES.items()}


@tabled(wire_field("users", "[]string", nullable=True))
@dataclass(slots=True)
class DescribeUserScramCredentialsRequest(Tabled):
    API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    users: list[str] | None = None


@dataclass(slots=True)
class CredentialInfo:
    mechanism: int
    iterations: int


@dataclass(slots=True)
class UserCredentials:
    user: str
    error_code: int = 0
    error_message: str | None = None
    credentials: list[CredentialInfo] = field(default_factory=list)


USER = wire_field("user", "string")


@tabled(
    struct_array(
        "results",
        UserCredentials,
        USER,
        *ERROR,
        struct_array(
            "credentials",
            CredentialInfo,
            wire_field("mechanism", "int8"),
            wire_field("iterations", "int32"),
        ),
    )
)
@dataclass(slots=True)
class DescribeUserScramCredentialsResponse(Tabled):
    results: list[UserCredentials]


@dataclass(slots=True)
class ScramDeletion:
    user: str
    mechanism: int


@dataclass(slots=True)
class ScramUpsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@tabled(
    struct_array("deletions", ScramDeletion, USER, wire_field("mechanism", "int8")),
    struct_array(
        "upsertions",
        ScramUpsertion,
        USER,
        wire_field("mechanism", "int8"),
        wire_field("iterations", "int32"),
        wire_field("salt", "bytes"),
        wire_field("salted_password", "bytes"),
    ),
)
@dataclass(slots=True)
class AlterUserScramCredentialsRequest(Tabled):
    API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    deletions: list[ScramDeletion] = field(default_factory=list)
    upsertions: list[ScramUpsertion] = field(default_factory=list)


@dataclass(slots=True)
class UserAlterationResult:
    user: str
    error_code: int = 0
    error_message: str | None = None


@tabled(struct_array("results", UserAlterationResult, USER, *ERROR))
@dataclass(slots=True)
class AlterUserScramCredentialsResponse(Tabled):
    results: list[UserAlterationResult]
