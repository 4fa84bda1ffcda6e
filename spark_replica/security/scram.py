"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and SASL/PLAIN, with no I/O.

The exchange is bytes in, bytes out: the broker looks up the credential (ZooKeeper) and
moves the messages (SaslAuthenticate); this module only computes and checks them.

Rules kept here, so the callers need not know them:
- Only "n,," channel binding is spoken ("y,," is read as no binding; "p=" is refused:
  replog's TLS does not export channel-binding data).
- A server never reveals whether a user exists: an unknown user gets a fake credential
  derived from a key the whole cluster shares (`fake_credential`), so every broker shows
  the same salt and iterations for that name on every attempt, before and after
  restarts; the exchange does the same work to its final step and fails there with the
  same message as a wrong password. SASL/PLAIN likewise hashes against a fake credential.
- The client refuses a server that asks for fewer than MIN_ITERATIONS (a downgrade) or
  more than MAX_ITERATIONS (a way to make the client spin).
- Passwords are used as their UTF-8 bytes, without SASLprep, as Kafka does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_replica.errors import (
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
)

MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 32),
    "SCRAM-SHA-512": ("sha512", 64),
}
MIN_ITERATIONS = 4096
# Kafka's maximum for a stored credential; also the most a client will compute for a server.
MAX_ITERATIONS = 16384

SALT_BYTES = 32
# The only channel binding spoken: none ("n"), no authorization id.
GS2_HEADER = "n,,"
INVALID_CREDENTIALS = "authentication failed: invalid credentials"

# The key of the fake credentials: at least this long (the cluster's is FAKE_KEY_BYTES).
FAKE_KEY_BYTES = 32
MIN_FAKE_KEY_BYTES = 16
# What SASL/PLAIN checks a password against, most preferred first.
PLAIN_CHECKED_AGAINST = ("SCRAM-SHA-512", "SCRAM-SHA-256")


def _hash_spec(mechanism: str) -> tuple[str, int]:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        valid = ", ".join(MECHANISMS)
        raise ConfigError(f"unknown SCRAM mechanism {mechanism!r} (valid: {valid})") from None


def _check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ConfigError(
            f"SCRAM iterations {iterations} out of range [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64 decoding; ValueError on anything else."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not base64: {text!r}") from exc


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps for one user and mechanism: never the password itself."""

    mechanism: str
    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def __post_init__(self) -> None:
        _, size = _hash_spec(self.mechanism)
        if not self.salt:
            raise ConfigError("a SCRAM credential needs a non-empty salt")
        if len(self.stored_key) != size or len(self.server_key) != size:
            raise ConfigError(f"{self.mechanism} keys must be {size} bytes")
        if self.iterations < MIN_ITERATIONS:
            raise ConfigError(
                f"SCRAM iterations {self.iterations} below the minimum {MIN_ITERATIONS}"
            )

    def encode(self) -> str:
        """Kafka's ZooKeeper form of a credential."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def decode(cls, mechanism: str, text: str) -> ScramCredential:
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, equals, value = part.partition("=")
            if not equals or key in fields:
                raise ConfigError(f"malformed {mechanism} credential: bad field {key!r}")
            fields[key] = value
        expected = {"salt", "stored_key", "server_key", "iterations"}
        if set(fields) != expected:
            raise ConfigError(
                f"malformed {mechanism} credential: fields {sorted(fields)}, "
                f"expected {sorted(expected)}"
            )
        try:
            salt = _unb64(fields["salt"])
            stored_key = _unb64(fields["stored_key"])
            server_key = _unb64(fields["server_key"])
        except ValueError as exc:
            raise ConfigError(f"malformed {mechanism} credential: {exc}") from None
        if not fields["iterations"].isdigit():
            raise ConfigError(
                f"malformed {mechanism} credential: iterations {fields['iterations']!r}"
            )
        return cls(mechanism, salt, stored_key, server_key, int(fields["iterations"]))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i), which is PBKDF2 with the mechanism's HMAC."""
    name, _ = _hash_spec(mechanism)
    return hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)


def _hmac(name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, name).digest()


def _client_key(name: str, salted: bytes) -> bytes:
    return _hmac(name, salted, b"Client Key")


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential for a salted password computed elsewhere (AlterUserScramCredentials
    sends it so the password never leaves the client)."""
    name, size = _hash_spec(mechanism)
    _check_iterations(iterations)
    if len(salted_password) != size:
        raise ConfigError(f"a {mechanism} salted password must be {size} bytes")
    stored_key = hashlib.new(name, _client_key(name, salted_password)).digest()
    server_key = _hmac(name, salted_password, b"Server Key")
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    _check_iterations(iterations)
    if salt is None:
        salt = secrets.token_bytes(SALT_BYTES)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def verify_password(credential: ScramCredential, password: str) -> bool:
    """Whether a SASL/PLAIN password matches a stored SCRAM credential (constant time)."""
    name, _ = _hash_spec(credential.mechanism)
    salted = salted_password(credential.mechanism, password, credential.salt, credential.iterations)
    stored_key = hashlib.new(name, _client_key(name, salted)).digest()
    return hmac.compare_digest(stored_key, credential.stored_key)


def fake_credential(key: bytes, mechanism: str, username: str) -> ScramCredential:
    """The credential shown for a user that does not exist: derived from the cluster's
    secret `key`, so every broker shows the same salt for the same name, and shaped like
    a real one (salt length, iterations of a default credential), so that nothing in the
    exchange tells an unknown user from a known one. It never authenticates anyone: the
    caller knows it is fake and refuses the login whatever the proof."""
    if len(key) < MIN_FAKE_KEY_BYTES:
        raise ConfigError(f"the fake-credential key must be at least {MIN_FAKE_KEY_BYTES} bytes")
    _, size = _hash_spec(mechanism)

    def derive(label: str, length: int) -> bytes:
        message = "\0".join((label, mechanism, username)).encode("utf-8")
        return hmac.new(key, message, "sha512").digest()[:length]

    return ScramCredential(
        mechanism,
        derive("salt", SALT_BYTES),
        derive("stored_key", size),
        derive("server_key", size),
        MIN_ITERATIONS,
    )


def new_fake_key() -> bytes:
    """A new key for a cluster's fake credentials (made once, kept in ZooKeeper)."""
    return secrets.token_bytes(FAKE_KEY_BYTES)


def plain_credential(
    stored: Mapping[str, ScramCredential], key: bytes, username: str
) -> tuple[ScramCredential, bool]:
    """The credential a SASL/PLAIN password is checked against, and whether it is real.

    One of the user's SCRAM credentials (SCRAM-SHA-512 first), whichever mechanisms the
    listener enables; for an unknown user a fake one, so that the check costs the same
    PBKDF2 work either way.
    """
    for mechanism in PLAIN_CHECKED_AGAINST:
        credential = stored.get(mechanism)
        if credential is not None:
            return credential, True
    return fake_credential(key, PLAIN_CHECKED_AGAINST[0], username), False


def escape_username(username: str) -> str:
    """RFC 5802's saslname: ',' and '=' cannot appear raw in a message."""
    return username.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    """The user name of a saslname; ValueError if an '=' escape is not =2C or =3D."""
    parts = saslname.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part[:2] == "2C":
            out.append("," + part[2:])
        elif part[:2] == "3D":
            out.append("=" + part[2:])
        else:
            raise ValueError(f"bad escape in user name {saslname!r}")
    return "".join(out)


def new_nonce() -> str:
    """Printable, without ',' (the RFC's rule), from the system's CSPRNG."""
    return secrets.token_urlsafe(24)


def _valid_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    """A message's "x=value" attributes in order; SaslAuthenticationFailedError if malformed."""
    attributes = []
    for part in message.split(","):
        key, equals, value = part.partition("=")
        if not equals or len(key) != 1 or not key.isalpha():
            raise SaslAuthenticationFailedError(f"malformed SCRAM {what}: {message!r}")
        attributes.append((key, value))
    return attributes


def _expect(attributes: list[tuple[str, str]], keys: str, what: str) -> list[str]:
    """The values of the leading attributes, which must be exactly `keys` in that order.

    Further attributes are extensions and ignored, except "m" (mandatory extension),
    which RFC 5802 says must make the exchange fail when not understood.
    """
    found = [key for key, _ in attributes[: len(keys)]]
    if found != list(keys):
        raise SaslAuthenticationFailedError(
            f"malformed SCRAM {what}: attributes {','.join(found)}, expected {','.join(keys)}"
        )
    if any(key == "m" for key, _ in attributes):
        raise SaslAuthenticationFailedError(f"SCRAM {what}: unsupported mandatory extension")
    return [value for _, value in attributes[: len(keys)]]


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError(f"SCRAM {what} is not UTF-8") from None


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramClient:
    """One SCRAM exchange, client side: first_message, final_message, verify_server_final."""

    def __init__(
        self, mechanism: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        self._hash_name, self._size = _hash_spec(mechanism)
        if not username:
            raise ConfigError("SCRAM needs a user name")
        self.mechanism = mechanism
        self._password = password
        self._nonce = new_nonce() if nonce is None else nonce
        if not _valid_nonce(self._nonce):
            raise ConfigError("a SCRAM nonce must be printable ASCII without ','")
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism!r})"

    def first_message(self) -> bytes:
        return (GS2_HEADER + self._client_first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        if self._server_signature is not None:
            raise IllegalSaslStateError("SCRAM client: final message already sent")
        server_first_text = _text(server_first, "server-first message")
        attributes = _attributes(server_first_text, "server-first message")
        nonce, salt_text, iterations_text = _expect(attributes, "rsi", "server-first message")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationFailedError("SCRAM server nonce does not extend ours")
        if not _valid_nonce(nonce):
            raise SaslAuthenticationFailedError("SCRAM server nonce has invalid characters")
        try:
            salt = _unb64(salt_text)
        except ValueError:
            raise SaslAuthenticationFailedError("SCRAM server salt is not base64") from None
        if not iterations_text.isdigit():
            raise SaslAuthenticationFailedError(f"SCRAM iterations {iterations_text!r}")
        iterations = int(iterations_text)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise SaslAuthenticationFailedError(
                f"SCRAM server asked for {iterations} iterations "
                f"(accepted: {MIN_ITERATIONS} to {MAX_ITERATIONS})"
            )
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c={_b64(GS2_HEADER.encode())},r={nonce}"
        auth_message = ",".join((self._client_first_bare, server_first_text, without_proof))
        client_key = _client_key(self._hash_name, salted)
        stored_key = hashlib.new(self._hash_name, client_key).digest()
        signature = _hmac(self._hash_name, stored_key, auth_message.encode("utf-8"))
        server_key = _hmac(self._hash_name, salted, b"Server Key")
        self._server_signature = _hmac(self._hash_name, server_key, auth_message.encode())
        proof = _xor(client_key, signature)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        if self._server_signature is None:
            raise IllegalSaslStateError("SCRAM client: server-final before the final message")
        text = _text(server_final, "server-final message")
        key, _, value = text.partition(",")[0].partition("=")
        if key == "e":
            raise SaslAuthenticationFailedError(f"authentication failed: {value}")
        if key != "v":
            raise SaslAuthenticationFailedError(f"malformed SCRAM server-final: {text!r}")
        try:
            signature = _unb64(value)
        except ValueError:
            raise SaslAuthenticationFailedError("SCRAM server signature is not base64") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationFailedError(
                "authentication failed: the server's SCRAM signature is wrong "
                "(it does not know this user's credential)"
            )


class ScramServer:
    """One SCRAM exchange, server side: receive_client_first, server_first,
    receive_client_final. The caller looks the credential up between the first two."""

    def __init__(self, mechanism: str, *, nonce: str | None = None) -> None:
        self._hash_name, self._size = _hash_spec(mechanism)
        self.mechanism = mechanism
        self._server_nonce = new_nonce() if nonce is None else nonce
        if not _valid_nonce(self._server_nonce):
            raise ConfigError("a SCRAM nonce must be printable ASCII without ','")
        self.username: str | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._nonce = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._exists = False
        self._finished = False

    def receive_client_first(self, message: bytes) -> str:
        if self.username is not None:
            raise IllegalSaslStateError("SCRAM server: client-first message received twice")
        text = _text(message, "client-first message")
        cbind, comma, rest = text.partition(",")
        authzid, comma2, bare = rest.partition(",")
        if not comma or not comma2:
            raise SaslAuthenticationFailedError(f"malformed SCRAM client-first: {text!r}")
        if cbind.startswith("p="):
            raise SaslAuthenticationFailedError("SCRAM channel binding is not supported")
        if cbind not in ("n", "y"):
            raise SaslAuthenticationFailedError(f"malformed SCRAM gs2 header: {cbind!r}")
        saslname, client_nonce = _expect(_attributes(bare, "client-first"), "nr", "client-first")
        try:
            username = unescape_username(saslname)
        except ValueError as exc:
            raise SaslAuthenticationFailedError(f"SCRAM client-first: {exc}") from None
        if not username:
            raise SaslAuthenticationFailedError("SCRAM client-first: empty user name")
        if authzid and authzid != f"a={saslname}":
            raise SaslAuthenticationFailedError(
                "SCRAM: an authorization id different from the user name is not supported"
            )
        if not _valid_nonce(client_nonce):
            raise SaslAuthenticationFailedError("SCRAM client nonce has invalid characters")
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        self.username = username
        return username

    def server_first(self, credential: ScramCredential, *, exists: bool = True) -> bytes:
        """The server-first message for the user's credential; for an unknown user pass
        its `fake_credential` and exists=False: the exchange goes on alike and fails."""
        if self.username is None or self._server_first:
            raise IllegalSaslStateError("SCRAM server: server-first out of order")
        if credential.mechanism != self.mechanism:
            raise ValueError(f"a {credential.mechanism} credential for a {self.mechanism} exchange")
        self._credential, self._exists = credential, exists
        salt, iterations = credential.salt, credential.iterations
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode("utf-8")

    def receive_client_final(self, message: bytes) -> bytes:
        if not self._server_first or self._finished:
            raise IllegalSaslStateError("SCRAM server: client-final out of order")
        self._finished = True
        text = _text(message, "client-final message")
        without_proof, _, proof_attribute = text.rpartition(",")
        key, _, proof_text = proof_attribute.partition("=")
        if key != "p" or not without_proof:
            raise SaslAuthenticationFailedError("malformed SCRAM client-final: no proof")
        binding, nonce = _expect(_attributes(without_proof, "client-final"), "cr", "client-final")
        if binding != _b64(self._gs2_header.encode("utf-8")):
            raise SaslAuthenticationFailedError("SCRAM channel binding does not match")
        if nonce != self._nonce:
            raise SaslAuthenticationFailedError("SCRAM nonce does not match")
        try:
            proof = _unb64(proof_text)
        except ValueError:
            raise SaslAuthenticationFailedError("SCRAM proof is not base64") from None
        credential = self._credential
        assert credential is not None
        if len(proof) != self._size:
            raise SaslAuthenticationFailedError(INVALID_CREDENTIALS)
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        signature = _hmac(self._hash_name, credential.stored_key, auth_message.encode())
        client_key = _xor(proof, signature)
        matches = hmac.compare_digest(
            hashlib.new(self._hash_name, client_key).digest(), credential.stored_key
        )
        if not (matches and self._exists):
            raise SaslAuthenticationFailedError(INVALID_CREDENTIALS)
        server_signature = _hmac(self._hash_name, credential.server_key, auth_message.encode())
        return f"v={_b64(server_signature)}".encode()


def parse_plain(message: bytes) -> tuple[str, str]:
    """SASL/PLAIN (RFC 4616) "authzid NUL user NUL password" -> (user, password)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError("SASL/PLAIN message is not UTF-8") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise SaslAuthenticationFailedError(
            "malformed SASL/PLAIN message: expected authzid, user name and password"
        )
    authzid, username, password = parts
    if not username or not password:
        raise SaslAuthenticationFailedError("SASL/PLAIN: empty user name or password")
    if authzid and authzid != username:
        raise SaslAuthenticationFailedError(
            "SASL/PLAIN: an authorization id different from the user name is not supported"
        )
    return username, password


def plain_message(username: str, password: str) -> bytes:
    if not username or not password or "\0" in username or "\0" in password:
        raise ConfigError("SASL/PLAIN needs a user name and password without NUL characters")
    return f"\0{username}\0{password}".encode()
