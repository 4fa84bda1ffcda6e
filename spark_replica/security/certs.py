"""A local certificate authority for a development cluster: CA, server and client certificates.

Keys are EC P-256: generating one takes milliseconds where an RSA key takes a second or
more, which matters when `replog up` makes one per broker. Every certificate carries the
extensions Python's strict X.509 verification asks for (key identifiers, key usage,
critical basic constraints), so a chain made here verifies with `ssl`'s defaults.

Kafka's PEM keystore layout is used: one file holds the private key followed by the
certificate chain (the leaf, then the CA), which is what `ssl.keystore.location` with
`ssl.keystore.type=PEM` names and what `ssl.SSLContext.load_cert_chain` reads. Files
holding a private key are written with mode 0600, atomically (a temporary file renamed
over the old one), so a key is never readable by others, not even for a moment.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from spark_replica.errors import ConfigError

CA_CERT_FILE = "ca.pem"
CA_KEY_FILE = "ca-key.pem"
CA_VALID_DAYS = 3650
LEAF_VALID_DAYS = 825
CLOCK_SKEW = datetime.timedelta(minutes=5)
DEFAULT_HOSTS = ("127.0.0.1", "localhost")
PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644


@dataclass(frozen=True)
class CaFiles:
    """Where a CA's certificate (public, the clients' trust store) and key (0600) live."""

    cert: Path
    key: Path


def write_private_file(path: Path, data: bytes | str) -> None:
    """Write `data` to `path` readable by its owner alone, atomically."""
    _write_atomic(path, data.encode() if isinstance(data, str) else data, PRIVATE_MODE)


def make_ca(directory: Path, common_name: str = "replog local CA") -> CaFiles:
    """Create a CA in `directory` (`ca.pem`, `ca-key.pem`), replacing any there."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=CA_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    files = CaFiles(cert=directory / CA_CERT_FILE, key=directory / CA_KEY_FILE)
    write_private_file(files.key, _key_pem(key))
    _write_atomic(files.cert, cert.public_bytes(serialization.Encoding.PEM), PUBLIC_MODE)
    return files


def issue_server_cert(
    ca: CaFiles, path: Path, hosts: Sequence[str] = (), common_name: str = "localhost"
) -> Path:
    """Write a key and chain to `path` for a server reachable as 127.0.0.1, localhost and `hosts`.

    The certificate may also authenticate its holder as a client (`common_name` is then
    its principal), so a broker can use one keystore for its listener and for the
    connections it opens to other brokers, as a Kafka broker does.
    """
    names = _subject_alternative_names([*DEFAULT_HOSTS, *hosts])
    return _issue(
        ca,
        path,
        common_name,
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        names,
    )


def issue_client_cert(ca: CaFiles, path: Path, common_name: str) -> Path:
    """Write a key and chain to `path` for a client whose principal is `User:<common_name>`."""
    return _issue(ca, path, common_name, [ExtendedKeyUsageOID.CLIENT_AUTH], None)


def _issue(
    ca: CaFiles,
    path: Path,
    common_name: str,
    usages: list[x509.ObjectIdentifier],
    alternative_names: x509.SubjectAlternativeName | None,
) -> Path:
    if not common_name:
        raise ConfigError("a certificate needs a non-empty common name")
    ca_cert, ca_key = _load_ca(ca)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=LEAF_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if alternative_names is not None:
        builder = builder.add_extension(alternative_names, critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (cert, ca_cert))
    write_private_file(path, _key_pem(key) + chain)
    return path


def _load_ca(ca: CaFiles) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
        key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the CA in {ca.cert} and {ca.key}: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{ca.key} is not an EC private key")
    return cert, key


def _subject_alternative_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    """IP entries for addresses, DNS entries for names (hostname checks match them apart)."""
    entries: list[x509.GeneralName] = []
    for host in dict.fromkeys(h.strip() for h in hosts):
        if not host:
            continue
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb", opener=lambda name, flags: os.open(name, flags, mode)) as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
