"""The security files of a local cluster started by `replog up --security MODE`.

A secure local cluster needs a CA, a certificate per broker, three random secrets and
the properties files that put them to use; this module makes them in the cluster
directory and reuses them on every later `up`, so data written under one set of
credentials stays reachable:

    <dir>/admin.properties           0600  Kafka client properties of the admin super user,
                                           plus zookeeper.digest for the CLI's ZooKeeper writes
    <dir>/security/                  0700
        secrets.json                 0600  the admin, broker and ZooKeeper passwords
        ca.pem, ca-key.pem                 the CA (its key 0600)
        broker-N.pem                 0600  broker N's key and chain (TLS modes)
        admin-client.pem             0600  the admin's client certificate (ssl mode)
        broker-N.properties          0600  broker N's --config file

Each broker gets a properties file of its own because its keystore is its own; every
secret sits in those files, never on a command line. A broker's certificate has CN=broker
and serves both ways, as a Kafka broker's keystore does: as its listener's certificate,
and as its client certificate on connections to other brokers, where in ssl mode it makes
the broker `User:broker`, a super user like `admin`.

The mode is a `security.protocol` in lower case; cluster_dir records it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spark_replica.errors import ConfigError
from spark_replica.security.certs import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    CaFiles,
    issue_client_cert,
    issue_server_cert,
    make_ca,
    write_private_file,
)
from spark_replica.security.scram import MECHANISMS, make_credential
from spark_replica.security.settings import (
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_PROTOCOLS,
    SASL_SSL,
    SCRAM_LOGIN_MODULE,
    SSL,
    TLS_PROTOCOLS,
    SecurityConfig,
    load_properties,
)
from spark_replica.tools.launcher.cluster_dir import ADMIN_PROPERTIES
from spark_replica.zk.kazoo_errors import translated
from spark_replica.zk.security_store import read_credential, write_credential
from spark_replica.zk.session import connect, digest_acls

ADMIN_USER = "admin"
BROKER_USER = "broker"
SECURITY_DIR = "security"
SECRETS_FILE = "secrets.json"
ADMIN_CLIENT_CERT = "admin-client.pem"
PRIVATE_DIR_MODE = 0o700
CLIENT_MECHANISM = "SCRAM-SHA-256"
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ZOOKEEPER_DIGEST = "zookeeper.digest"
PASSWORD_BYTES = 24
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True)
class Secrets:
    admin_password: str = field(repr=False)
    broker_password: str = field(repr=False)
    zookeeper_password: str = field(repr=False)

    @classmethod
    def generate(cls) -> Secrets:
        return cls(*(secrets.token_urlsafe(PASSWORD_BYTES) for _ in range(3)))

    @property
    def zookeeper_digest(self) -> str:
        """The digest login of brokers and admin alike: znodes either writes, both may change."""
        return f"{BROKER_USER}:{self.zookeeper_password}"


@dataclass(frozen=True)
class LocalSecurity:
    """Where a secure local cluster's files are, and the secrets in them."""

    directory: Path  # the cluster directory, absolute
    mode: str
    secrets: Secrets

    @property
    def protocol(self) -> str:
        return self.mode.upper()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @property
    def security_dir(self) -> Path:
        return self.directory / SECURITY_DIR

    @property
    def ca(self) -> CaFiles:
        return CaFiles(cert=self.security_dir / CA_CERT_FILE, key=self.security_dir / CA_KEY_FILE)

    @property
    def admin_properties(self) -> Path:
        return self.directory / ADMIN_PROPERTIES

    @property
    def admin_client_cert(self) -> Path:
        return self.security_dir / ADMIN_CLIENT_CERT

    def broker_keystore(self, broker_id: int) -> Path:
        return self.security_dir / f"broker-{broker_id}.pem"

    def broker_config_file(self, broker_id: int) -> Path:
        return broker_config_file(self.directory, broker_id)


def protocol_of(mode: str) -> str:
    """The `security.protocol` a recorded mode stands for; ConfigError for an unknown one."""
    if mode.upper() not in PROTOCOLS:
        modes = ", ".join(p.lower() for p in PROTOCOLS)
        raise ConfigError(f"unknown security mode {mode!r}; use one of {modes}")
    return mode.upper()


def broker_config_file(directory: Path, broker_id: int) -> Path:
    return directory.resolve() / SECURITY_DIR / f"broker-{broker_id}.properties"


def prepare(
    directory: Path, mode: str, broker_ids: Iterable[int], hosts: Sequence[str] = ()
) -> LocalSecurity:
    """Make what is missing (secrets, CA, certificates) and write every properties file.

    A new CA means new certificates for every holder: ones signed by an older CA would
    no longer verify.
    """
    if protocol_of(mode) == PLAINTEXT:
        raise ConfigError("a plaintext cluster has no security files")
    root = directory.resolve()
    security_dir = root / SECURITY_DIR
    security_dir.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    security_dir.chmod(PRIVATE_DIR_MODE)
    local = LocalSecurity(root, mode.lower(), _load_or_make_secrets(security_dir / SECRETS_FILE))
    ids = sorted(set(broker_ids))
    if local.uses_tls:
        _make_certificates(local, ids, hosts)
    for broker_id in ids:
        properties = render_properties(broker_properties(local, broker_id))
        write_private_file(local.broker_config_file(broker_id), properties)
    write_private_file(local.admin_properties, render_properties(admin_properties(local)))
    return local


def _make_certificates(
    local: LocalSecurity, broker_ids: Sequence[int], hosts: Sequence[str]
) -> None:
    ca = local.ca
    fresh_ca = not (ca.cert.is_file() and ca.key.is_file())
    if fresh_ca:
        make_ca(local.security_dir)
    for broker_id in broker_ids:
        keystore = local.broker_keystore(broker_id)
        if fresh_ca or not keystore.is_file():
            issue_server_cert(ca, keystore, hosts, common_name=BROKER_USER)
    if local.protocol == SSL and (fresh_ca or not local.admin_client_cert.is_file()):
        issue_client_cert(ca, local.admin_client_cert, ADMIN_USER)


def _load_or_make_secrets(path: Path) -> Secrets:
    if not path.exists():
        made = Secrets.generate()
        document = {
            "admin_password": made.admin_password,
            "broker_password": made.broker_password,
            "zookeeper_password": made.zookeeper_password,
        }
        write_private_file(path, json.dumps(document, indent=2) + "\n")
        return made
    try:
        document = json.loads(path.read_text())
        return Secrets(
            admin_password=str(document["admin_password"]),
            broker_password=str(document["broker_password"]),
            zookeeper_password=str(document["zookeeper_password"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not a readable secrets file: {exc!r}") from exc


def scram_jaas_config(username: str, password: str) -> str:
    return f'{SCRAM_LOGIN_MODULE} required username="{username}" password="{password}";'


def broker_properties(local: LocalSecurity, broker_id: int) -> dict[str, str]:
    """Broker `broker_id`'s --config: its listener, its logins, the authorizer."""
    props = {"listener.security.protocol": local.protocol}
    if local.uses_tls:
        props |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(local.broker_keystore(broker_id)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(local.ca.cert),
            "ssl.client.auth": "required" if local.protocol == SSL else "none",
        }
    if local.uses_sasl:
        props |= {
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
            "sasl.jaas.config": scram_jaas_config(BROKER_USER, local.secrets.broker_password),
        }
    return props | {
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        "allow.everyone.if.no.acl.found": "false",
        "zookeeper.set.acl": "true",
        ZOOKEEPER_DIGEST: local.secrets.zookeeper_digest,
    }


def admin_properties(local: LocalSecurity) -> dict[str, str]:
    """The admin super user's client properties, in Kafka's Java names."""
    props = {"security.protocol": local.protocol}
    if local.uses_tls:
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(local.ca.cert)}
    if local.protocol == SSL:
        props |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(local.admin_client_cert),
        }
    if local.uses_sasl:
        props |= {
            "sasl.mechanism": CLIENT_MECHANISM,
            "sasl.jaas.config": scram_jaas_config(ADMIN_USER, local.secrets.admin_password),
        }
    return props | {ZOOKEEPER_DIGEST: local.secrets.zookeeper_digest}


def render_properties(props: Mapping[str, str]) -> str:
    """A Java .properties text (values escaped so that any reader gets them back as given)."""
    return "".join(f"{key}={_escape(value)}\n" for key, value in props.items())


def _escape(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + escaped if escaped[:1] in (" ", "\t", "\f") else escaped


def prepare_zookeeper(zookeeper: str, local: LocalSecurity, *, own_server: bool) -> list[str]:
    """Before the first broker starts: lock ZooKeeper's root and seed the SCRAM logins.

    With `own_server` (the embedded ZooKeeper, used by this cluster alone) the root znode
    becomes writable by the cluster's digest alone, so nobody else can delete /controller
    or create top-level znodes; the brokers' own znodes get such ACLs as they create them
    (zookeeper.set.acl). The admin and broker SCRAM credentials that ZooKeeper does not
    hold yet are written (brokers authenticate each other with them); one present already
    is left alone, since it may have been changed on purpose with `replog users`.
    Returns what was written, as `user/mechanism`.
    """
    logins = {ADMIN_USER: local.secrets.admin_password, BROKER_USER: local.secrets.broker_password}
    written: list[str] = []
    zk = connect(zookeeper, digest=local.secrets.zookeeper_digest)
    try:
        if own_server:
            with translated():
                zk.set_acls("/", digest_acls(local.secrets.zookeeper_digest))
        if not local.uses_sasl:
            return written
        for username, password in logins.items():
            for mechanism in MECHANISMS:
                if read_credential(zk, username, mechanism) is None:
                    write_credential(zk, username, make_credential(mechanism, password))
                    written.append(f"{username}/{mechanism}")
    finally:
        zk.stop()
        zk.close()
    return written


def admin_security(directory: Path) -> SecurityConfig:
    """The admin's client settings from the cluster directory's admin.properties."""
    return SecurityConfig.from_properties(load_properties(directory / ADMIN_PROPERTIES))
