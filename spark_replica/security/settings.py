"""The client's security settings: Kafka's client property names, checked once.

Operators bring client properties from Kafka (Java names) or librdkafka; both are read
here into one `SecurityConfig`. The rule that matters most: a security-looking setting
that replog does not support is an error naming it, never ignored, because ignoring
one makes a pipeline look secure while it sends plaintext or trusts the wrong peer.
Non-security settings (`bootstrap.servers`, `client.id`, ...) are other parsers'
business and are passed over.

Everything here is pure except `client_ssl_context` and `load_properties`, which read
files. Error messages never contain a password.
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spark_replica.errors import ConfigError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
# The protocols that encrypt with TLS, and those that authenticate with SASL.
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
PLAIN = "PLAIN"
SASL_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512, PLAIN)

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

# Property names: Kafka's Java client first, then librdkafka's.
SECURITY_PROTOCOL = "security.protocol"
SASL_MECHANISM = "sasl.mechanism"
SASL_JAAS_CONFIG = "sasl.jaas.config"
TRUSTSTORE_LOCATION = "ssl.truststore.location"
TRUSTSTORE_TYPE = "ssl.truststore.type"
KEYSTORE_LOCATION = "ssl.keystore.location"
KEYSTORE_TYPE = "ssl.keystore.type"
ENDPOINT_IDENTIFICATION = "ssl.endpoint.identification.algorithm"
RDKAFKA_SASL_MECHANISMS = "sasl.mechanisms"
RDKAFKA_SASL_USERNAME = "sasl.username"
RDKAFKA_SASL_PASSWORD = "sasl.password"
RDKAFKA_CA_LOCATION = "ssl.ca.location"
RDKAFKA_CERTIFICATE_LOCATION = "ssl.certificate.location"
RDKAFKA_KEY_LOCATION = "ssl.key.location"

ACCEPTED_SETTINGS = frozenset(
    {
        SECURITY_PROTOCOL,
        SASL_MECHANISM,
        SASL_JAAS_CONFIG,
        TRUSTSTORE_LOCATION,
        TRUSTSTORE_TYPE,
        KEYSTORE_LOCATION,
        KEYSTORE_TYPE,
        ENDPOINT_IDENTIFICATION,
        RDKAFKA_SASL_MECHANISMS,
        RDKAFKA_SASL_USERNAME,
        RDKAFKA_SASL_PASSWORD,
        RDKAFKA_CA_LOCATION,
        RDKAFKA_CERTIFICATE_LOCATION,
        RDKAFKA_KEY_LOCATION,
    }
)
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.")

_PEM_ONLY = "only PEM is supported"
_INLINE_PEM = "inline PEM is not supported; write it to a file and give the file's location"
_ENCRYPTED_KEY = (
    "encrypted keys are not supported; give an unencrypted PEM key and protect the file "
    "with its permissions"
)
_JAVA_ONLY = "a Java TLS setting with no equivalent here"
_TLS_FIXED = "replog always uses TLS 1.2 or later with Python's default cipher suites"
# Why a known security setting is refused; other unknown ssl./sasl./security. keys get
# a generic message listing what is accepted.
_REFUSED = {
    "ssl.truststore.password": "a PEM trust store has no password; remove it",
    "ssl.keystore.password": _ENCRYPTED_KEY,
    "ssl.key.password": _ENCRYPTED_KEY,
    "ssl.truststore.certificates": _INLINE_PEM,
    "ssl.keystore.certificate.chain": _INLINE_PEM,
    "ssl.keystore.key": _INLINE_PEM,
    "ssl.ca.pem": _INLINE_PEM,
    "ssl.certificate.pem": _INLINE_PEM,
    "ssl.key.pem": _INLINE_PEM,
    "ssl.protocol": _TLS_FIXED,
    "ssl.enabled.protocols": _TLS_FIXED,
    "ssl.cipher.suites": _TLS_FIXED,
    "ssl.keymanager.algorithm": _JAVA_ONLY,
    "ssl.trustmanager.algorithm": _JAVA_ONLY,
    "ssl.secure.random.implementation": _JAVA_ONLY,
    "ssl.provider": _JAVA_ONLY,
    "ssl.engine.factory.class": _JAVA_ONLY,
    "enable.ssl.certificate.verification": (
        "certificate verification cannot be turned off; trust the broker's CA with "
        f"{TRUSTSTORE_LOCATION} (or {ENDPOINT_IDENTIFICATION}= to skip only the host name check)"
    ),
}
_REFUSED_PREFIXES = {
    "sasl.kerberos.": "Kerberos (GSSAPI) is not supported",
    "sasl.oauthbearer.": "OAUTHBEARER is not supported",
    "sasl.login.": "login callbacks and refresh are not supported",
}

_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_OPTIONS = ("username", "password")
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.DOTALL)


@dataclass(frozen=True)
class SecurityConfig:
    """How a client secures its connections; plain values, so it pickles small.

    The SSL context is built on first use and cached outside the object, so a config
    shipped to Spark executors carries no context with it.
    """

    protocol: str = PLAINTEXT
    sasl_mechanism: str = SCRAM_SHA_256
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None  # None: the system trust store
    check_hostname: bool = True
    cert_file: Path | None = None  # client certificate chain (PEM), for mutual TLS
    key_file: Path | None = None  # its key (PEM); None: the key is in cert_file

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigError(
                f"{SECURITY_PROTOCOL}={self.protocol}: use one of {', '.join(PROTOCOLS)}"
            )
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"{SASL_MECHANISM}={self.sasl_mechanism}: supported mechanisms are "
                f"{', '.join(SASL_MECHANISMS)}"
            )
        if self.uses_sasl and (not self.username or self.password is None):
            raise ConfigError(
                f"{SECURITY_PROTOCOL}={self.protocol} needs a username and a password: give "
                f"{SASL_JAAS_CONFIG}='{_login_module(self.sasl_mechanism)} required "
                'username="..." password="...";\' (or sasl.username and sasl.password)'
            )
        if self.uses_sasl and self.sasl_mechanism == PLAIN and self.protocol != SASL_SSL:
            raise ConfigError(
                f"{SASL_MECHANISM}={PLAIN} sends the password as it is, so it is only allowed "
                f"with {SECURITY_PROTOCOL}={SASL_SSL}, not {self.protocol}"
            )
        if self.key_file is not None and self.cert_file is None:
            raise ConfigError(
                f"{RDKAFKA_KEY_LOCATION} is given without a certificate "
                f"({RDKAFKA_CERTIFICATE_LOCATION} or {KEYSTORE_LOCATION})"
            )

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for connections to brokers (None without TLS), built once."""
        if not self.uses_tls:
            return None
        return _client_ssl_context(self)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> SecurityConfig:
        """Kafka (Java or librdkafka) client properties -> config; ConfigError naming a bad one."""
        return _from_settings({key: (key, value) for key, value in props.items()})

    @classmethod
    def from_spark_options(cls, options: Mapping[str, str]) -> SecurityConfig:
        """The security settings among a source's or sink's options, as kafka.X or replog.X.

        Spark's options are case-insensitive, so keys are compared lower-cased.
        """
        settings: dict[str, tuple[str, str]] = {}
        for option, value in sorted(options.items()):
            lowered = option.lower()
            prefix = next((p for p in SPARK_PREFIXES if lowered.startswith(p)), None)
            if prefix is None:
                continue
            key = lowered[len(prefix) :]
            if not is_security_setting(key):
                continue
            if key in settings and settings[key][1].strip() != value.strip():
                raise ConfigError(
                    f"{settings[key][0]} and {option} have different values; give one"
                )
            settings.setdefault(key, (option, value))
        return _from_settings(settings)


SPARK_PREFIXES = ("kafka.", "replog.")


def is_security_setting(key: str) -> bool:
    """Whether a property (without a Spark prefix) is this module's business."""
    lowered = key.lower()
    return lowered.startswith(_SECURITY_PREFIXES) or lowered in _REFUSED


def load_properties(path: Path) -> dict[str, str]:
    """Read a Java .properties file (comments, `=`/`:`/space separators, continuations)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"properties file {path} is not UTF-8 text") from None
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_property(line)
        props[key] = value
    return props


def _logical_lines(text: str) -> list[str]:
    """Lines with comments and blanks dropped and `\\`-continuations joined."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        stripped = raw.lstrip(" \t\f")
        if pending is None and (not stripped or stripped[0] in "#!"):
            continue
        current = stripped if pending is None else pending + stripped
        trailing = len(current) - len(current.rstrip("\\"))
        if trailing % 2 == 1:
            pending = current[:-1]
            continue
        pending = None
        lines.append(current)
    if pending is not None:
        lines.append(pending)
    return lines


def _split_property(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line) and line[index] not in "=: \t\f":
        index += 2 if line[index] == "\\" else 1
    key = line[:index]
    rest = line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1]
        if escaped == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[index + 2 : index + 6]):
            out.append(chr(int(text[index + 2 : index + 6], 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


def _from_settings(settings: Mapping[str, tuple[str, str]]) -> SecurityConfig:
    """Build a config from `key -> (name as the user wrote it, value)`."""
    given = {key.lower(): (name, value.strip()) for key, (name, value) in settings.items()}
    given = {key: found for key, found in given.items() if is_security_setting(key)}
    for key, (name, value) in given.items():
        _refuse_unsupported(key, name, value)

    def one_of(*keys: str) -> tuple[str, str] | None:
        found = [given[key] for key in keys if key in given]
        if len({value for _, value in found}) > 1:
            raise ConfigError(f"{' and '.join(name for name, _ in found)} differ; give one")
        return found[0] if found else None

    protocol = _upper(given.get(SECURITY_PROTOCOL), PLAINTEXT)
    mechanism_given = one_of(SASL_MECHANISM, RDKAFKA_SASL_MECHANISMS)
    mechanism = _upper(mechanism_given, SCRAM_SHA_256)
    username, password = _credentials(given, mechanism, mechanism_given is not None)
    ca_file = one_of(TRUSTSTORE_LOCATION, RDKAFKA_CA_LOCATION)
    cert_file = one_of(KEYSTORE_LOCATION, RDKAFKA_CERTIFICATE_LOCATION)
    key_file = given.get(RDKAFKA_KEY_LOCATION)
    _refuse_unused(given, protocol)
    return SecurityConfig(
        protocol=protocol,
        sasl_mechanism=mechanism,
        username=username,
        password=password,
        ca_file=_path(ca_file),
        check_hostname=_check_hostname(given.get(ENDPOINT_IDENTIFICATION)),
        cert_file=_path(cert_file),
        key_file=_path(key_file),
    )


def _refuse_unsupported(key: str, name: str, value: str) -> None:
    if key in _REFUSED:
        raise ConfigError(f"{name} is not supported: {_REFUSED[key]}")
    for prefix, why in _REFUSED_PREFIXES.items():
        if key.startswith(prefix):
            raise ConfigError(f"{name} is not supported: {why}")
    if key not in ACCEPTED_SETTINGS:
        raise ConfigError(
            f"{name} is not a security setting replog supports; it takes "
            f"{', '.join(sorted(ACCEPTED_SETTINGS))}"
        )
    if key in (TRUSTSTORE_TYPE, KEYSTORE_TYPE) and value.upper() != "PEM":
        location = TRUSTSTORE_LOCATION if key == TRUSTSTORE_TYPE else KEYSTORE_LOCATION
        raise ConfigError(
            f"{name}={value}: {_PEM_ONLY}; convert the store with keytool/openssl and point "
            f"{location} at a PEM file"
        )
    if key == SECURITY_PROTOCOL and value.upper() not in PROTOCOLS:
        raise ConfigError(f"{name}={value}: use one of {', '.join(PROTOCOLS)}")
    if key in (SASL_MECHANISM, RDKAFKA_SASL_MECHANISMS) and value.upper() not in SASL_MECHANISMS:
        raise ConfigError(f"{name}={value}: supported mechanisms are {', '.join(SASL_MECHANISMS)}")


def _refuse_unused(given: Mapping[str, tuple[str, str]], protocol: str) -> None:
    """A setting the protocol would not use means the protocol is likely not the intended one."""
    uses_tls = protocol in TLS_PROTOCOLS
    uses_sasl = protocol in SASL_PROTOCOLS
    for key, (name, _) in sorted(given.items()):
        if key == SECURITY_PROTOCOL:
            continue
        if (key.startswith("ssl.") and not uses_tls) or (key.startswith("sasl.") and not uses_sasl):
            raise ConfigError(
                f"{name} is set but {SECURITY_PROTOCOL}={protocol} does not use it; set "
                f"{SECURITY_PROTOCOL} to the protocol the brokers' listener speaks"
            )


def _upper(found: tuple[str, str] | None, default: str) -> str:
    return default if found is None else found[1].upper()


def _path(found: tuple[str, str] | None) -> Path | None:
    if found is None:
        return None
    name, value = found
    if not value:
        raise ConfigError(f"{name} is empty: give the path of a PEM file")
    return Path(value).expanduser()


def _check_hostname(found: tuple[str, str] | None) -> bool:
    if found is None:
        return True
    name, value = found
    lowered = value.lower()
    if lowered == "https":
        return True
    if lowered in ("", "none"):
        return False
    raise ConfigError(f"{name}={value}: use https (check the host name) or an empty value (do not)")


def _credentials(
    given: Mapping[str, tuple[str, str]], mechanism: str, mechanism_given: bool
) -> tuple[str | None, str | None]:
    """(username, password) from sasl.jaas.config or librdkafka's sasl.username/password."""
    username = given.get(RDKAFKA_SASL_USERNAME)
    password = given.get(RDKAFKA_SASL_PASSWORD)
    jaas = given.get(SASL_JAAS_CONFIG)
    if jaas is None:
        return (
            None if username is None else username[1],
            None if password is None else password[1],
        )
    if username is not None or password is not None:
        raise ConfigError(
            f"give the login either in {jaas[0]} or in {RDKAFKA_SASL_USERNAME}/"
            f"{RDKAFKA_SASL_PASSWORD}, not both"
        )
    module, options = parse_jaas_config(jaas[1], jaas[0])
    expected = _login_module(mechanism)
    if module != expected:
        source = "" if mechanism_given else " (the default)"
        raise ConfigError(
            f"{jaas[0]} uses {module.rsplit('.', 1)[-1]}, which does not go with "
            f"{SASL_MECHANISM}={mechanism}{source}; use {expected.rsplit('.', 1)[-1]} or set "
            f"{SASL_MECHANISM} to match"
        )
    return options.get("username"), options.get("password")


def _login_module(mechanism: str) -> str:
    return PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE


def parse_jaas_config(text: str, name: str = SASL_JAAS_CONFIG) -> tuple[str, dict[str, str]]:
    """`<LoginModule> required key="value" ...;` -> (module class, options).

    One login module, Scram or Plain, with only `username` and `password`; values may be
    quoted (with `\\"` and `\\\\` escapes) or bare words. Messages never quote values,
    since one of them is a password.
    """
    tokens = _jaas_tokens(text, name)
    if len(tokens) < 3 or tokens[-1] != (";", False):
        raise ConfigError(
            f'{name}: expected \'<LoginModule> required username="..." password="...";\''
        )
    (module, _), (flag, _) = tokens[0], tokens[1]
    if module not in (SCRAM_LOGIN_MODULE, PLAIN_LOGIN_MODULE):
        raise ConfigError(
            f"{name}: login module {module} is not supported; use {SCRAM_LOGIN_MODULE} "
            f"or {PLAIN_LOGIN_MODULE}"
        )
    if flag not in _JAAS_FLAGS:
        raise ConfigError(f"{name}: expected a control flag such as required after {module}")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3 != 0:
        raise ConfigError(f'{name}: options must be key="value" pairs ended by one ;')
    for start in range(0, len(body), 3):
        (key, key_quoted), (equals, _), (value, _) = body[start : start + 3]
        if key_quoted or equals != "=" or value in ("=", ";"):
            raise ConfigError(f'{name}: options must be key="value" pairs ended by one ;')
        if key not in _JAAS_OPTIONS:
            raise ConfigError(
                f"{name}: option {key} is not supported; the login takes "
                f"{' and '.join(_JAAS_OPTIONS)}"
            )
        if key in options:
            raise ConfigError(f"{name}: option {key} is given twice")
        options[key] = value
    return module, options


def _jaas_tokens(text: str, name: str) -> list[tuple[str, bool]]:
    """(token, was it quoted) for each word, quoted string, `=` and `;`."""
    tokens: list[tuple[str, bool]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _JAAS_TOKEN.match(stripped, position)
        if match is None:
            raise ConfigError(f"{name}: cannot parse it (an unterminated quote?)")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append((re.sub(r"\\(.)", r"\1", quoted, flags=re.DOTALL), True))
        else:
            tokens.append((word or equals or semicolon, False))
        position = match.end()
    return tokens


@functools.lru_cache(maxsize=32)
def _client_ssl_context(config: SecurityConfig) -> ssl.SSLContext:
    """One context per distinct config: building one reads and parses the PEM files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = config.check_hostname
    if config.ca_file is None:
        context.load_default_certs()
    else:
        try:
            context.load_verify_locations(cafile=str(config.ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{TRUSTSTORE_LOCATION} (the CA file) {config.ca_file}: cannot load "
                f"PEM certificates from it: {_reason(exc)}"
            ) from None
    if config.cert_file is not None:
        try:
            context.load_cert_chain(
                str(config.cert_file),
                None if config.key_file is None else str(config.key_file),
                password=_refuse_encrypted_key,
            )
        except (OSError, ssl.SSLError) as exc:
            keys = f" and key {config.key_file}" if config.key_file is not None else ""
            raise ConfigError(
                f"{KEYSTORE_LOCATION} (the client certificate) {config.cert_file}{keys}: "
                f"cannot load an unencrypted PEM key and certificate chain: {_reason(exc)}"
            ) from None
    return context


def _refuse_encrypted_key() -> bytes:
    """Asked only for an encrypted key; an empty password fails instead of prompting."""
    return b""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
