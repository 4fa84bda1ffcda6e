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

from spark_replica.errors import ProtocolError
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer


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


@dataclass(slots=True)
class DescribeUserScramCredentialsRequest:
    API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    users: list[str] | None = None

    def write(self, w: Writer) -> None:
        w.array(self.users, w.string)

    @classmethod
    def read(cls, r: Reader) -> DescribeUserScramCredentialsRequest:
        return cls(r.array(r.required_string))


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

    def write(self, w: Writer) -> None:
        def write_info(info: CredentialInfo) -> None:
            w.int8(info.mechanism)
            w.int32(info.iterations)

        w.string(self.user)
        w.int16(self.error_code)
        w.string(self.error_message)
        w.array(self.credentials, write_info)

    @classmethod
    def read(cls, r: Reader) -> UserCredentials:
        user, code, message = r.required_string(), r.int16(), r.string()
        infos = r.required_array(lambda: CredentialInfo(r.int8(), r.int32()))
        return cls(user, code, message, infos)


@dataclass(slots=True)
class DescribeUserScramCredentialsResponse:
    results: list[UserCredentials]

    def write(self, w: Writer) -> None:
        w.array(self.results, lambda result: result.write(w))

    @classmethod
    def read(cls, r: Reader) -> DescribeUserScramCredentialsResponse:
        return cls(r.required_array(lambda: UserCredentials.read(r)))


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


@dataclass(slots=True)
class AlterUserScramCredentialsRequest:
    API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    deletions: list[ScramDeletion] = field(default_factory=list)
    upsertions: list[ScramUpsertion] = field(default_factory=list)

    def write(self, w: Writer) -> None:
        def write_deletion(d: ScramDeletion) -> None:
            w.string(d.user)
            w.int8(d.mechanism)

        def write_upsertion(u: ScramUpsertion) -> None:
            w.string(u.user)
            w.int8(u.mechanism)
            w.int32(u.iterations)
            w.bytes_(u.salt)
            w.bytes_(u.salted_password)

        w.array(self.deletions, write_deletion)
        w.array(self.upsertions, write_upsertion)

    @classmethod
    def read(cls, r: Reader) -> AlterUserScramCredentialsRequest:
        def read_upsertion() -> ScramUpsertion:
            user, mechanism, iterations = r.required_string(), r.int8(), r.int32()
            return ScramUpsertion(
                user, mechanism, iterations, _required_bytes(r), _required_bytes(r)
            )

        deletions = r.required_array(lambda: ScramDeletion(r.required_string(), r.int8()))
        return cls(deletions, r.required_array(read_upsertion))


@dataclass(slots=True)
class UserAlterationResult:
    user: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class AlterUserScramCredentialsResponse:
    results: list[UserAlterationResult]

    def write(self, w: Writer) -> None:
        def write_result(result: UserAlterationResult) -> None:
            w.string(result.user)
            w.int16(result.error_code)
            w.string(result.error_message)

        w.array(self.results, write_result)

    @classmethod
    def read(cls, r: Reader) -> AlterUserScramCredentialsResponse:
        return cls(
            r.required_array(
                lambda: UserAlterationResult(r.required_string(), r.int16(), r.string())
            )
        )


def _required_bytes(r: Reader) -> bytes:
    value = r.records()
    if value is None:
        raise ProtocolError("a required bytes field is null")
    return bytes(value)
