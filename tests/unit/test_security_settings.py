"""The client's security settings: Kafka/librdkafka property names, refusals, TLS context."""

from __future__ import annotations

import datetime
import pickle
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from spark_replica.errors import ConfigError
from spark_replica.security.settings import (
    PLAIN,
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_SSL,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SSL,
    SecurityConfig,
    load_properties,
    parse_jaas_config,
)

SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
    'password="s3cret";'
)
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="pw";'
)


def _key_and_cert(common_name: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA file, a client key+chain in one PEM, and the same as two files."""
    root = tmp_path_factory.mktemp("pems")
    key_pem, cert_pem = _key_and_cert("test-ca")
    paths = {
        "ca": root / "ca.pem",
        "combined": root / "client.pem",
        "cert": root / "client-cert.pem",
        "key": root / "client-key.pem",
        "junk": root / "junk.pem",
    }
    paths["ca"].write_bytes(cert_pem)
    paths["combined"].write_bytes(key_pem + cert_pem)
    paths["cert"].write_bytes(cert_pem)
    paths["key"].write_bytes(key_pem)
    paths["junk"].write_text("not a certificate\n")
    return paths


# --- the dataclass and its rules ---


def test_default_is_plaintext_without_tls() -> None:
    config = SecurityConfig()
    assert config.protocol == PLAINTEXT
    assert not config.uses_tls and not config.uses_sasl
    assert config.client_ssl_context() is None


def test_repr_hides_the_password() -> None:
    config = SecurityConfig(protocol=SASL_SSL, username="alice", password="hunter2")
    assert "hunter2" not in repr(config)
    assert "alice" in repr(config)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"protocol": "TLS"}, "security.protocol=TLS"),
        ({"sasl_mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
        ({"protocol": SASL_SSL}, "needs a username and a password"),
        ({"protocol": SASL_SSL, "username": "a"}, "needs a username and a password"),
        (
            {"protocol": SASL_PLAINTEXT, "sasl_mechanism": PLAIN, "username": "a", "password": "b"},
            "only allowed with security.protocol=SASL_SSL",
        ),
        ({"protocol": SSL, "key_file": Path("k.pem")}, "without a certificate"),
    ],
)
def test_invalid_configs_are_refused(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SecurityConfig(**kwargs)  # type: ignore[arg-type]


def test_config_pickles_without_its_ssl_context(pems: dict[str, Path]) -> None:
    config = SecurityConfig(protocol=SSL, ca_file=pems["ca"])
    context = config.client_ssl_context()
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config
    assert copy.client_ssl_context() is context


# --- the SSL context ---


def test_ssl_context_verifies_with_tls_1_2_or_later(pems: dict[str, Path]) -> None:
    context = SecurityConfig(protocol=SASL_SSL, username="a", password="b", ca_file=pems["ca"])
    built = context.client_ssl_context()
    assert built is not None
    assert built.verify_mode == ssl.CERT_REQUIRED
    assert built.check_hostname
    assert built.minimum_version == ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in built.get_ca_certs()] == [((("commonName", "test-ca"),),)]
    assert context.client_ssl_context() is built


def test_hostname_check_off_still_requires_a_trusted_certificate(pems: dict[str, Path]) -> None:
    built = SecurityConfig(protocol=SSL, ca_file=pems["ca"], check_hostname=False)
    context = built.client_ssl_context()
    assert context is not None
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_system_trust_store_without_a_ca_file() -> None:
    context = SecurityConfig(protocol=SSL).client_ssl_context()
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("cert, key", [("combined", None), ("cert", "key")])
def test_client_certificate_loads(pems: dict[str, Path], cert: str, key: str | None) -> None:
    config = SecurityConfig(
        protocol=SSL,
        ca_file=pems["ca"],
        cert_file=pems[cert],
        key_file=None if key is None else pems[key],
    )
    assert config.client_ssl_context() is not None


def test_missing_or_bad_ca_file_names_the_setting_and_path(
    pems: dict[str, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=rf"ssl\.truststore\.location.*{missing}"):
        SecurityConfig(protocol=SSL, ca_file=missing).client_ssl_context()
    with pytest.raises(ConfigError, match=rf"ssl\.truststore\.location.*{pems['junk']}"):
        SecurityConfig(protocol=SSL, ca_file=pems["junk"]).client_ssl_context()


def test_certificate_without_its_key_is_refused(pems: dict[str, Path]) -> None:
    config = SecurityConfig(protocol=SSL, ca_file=pems["ca"], cert_file=pems["cert"])
    with pytest.raises(ConfigError, match=rf"ssl\.keystore\.location.*{pems['cert']}"):
        config.client_ssl_context()


def test_encrypted_key_is_refused_without_prompting(pems: dict[str, Path], tmp_path: Path) -> None:
    key = serialization.load_pem_private_key(pems["key"].read_bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    key_file = tmp_path / "encrypted-key.pem"
    key_file.write_bytes(encrypted)
    config = SecurityConfig(protocol=SSL, cert_file=pems["cert"], key_file=key_file)
    with pytest.raises(ConfigError, match="unencrypted"):
        config.client_ssl_context()


# --- Kafka's and librdkafka's properties ---


def test_java_properties_for_sasl_ssl_with_scram(pems: dict[str, Path]) -> None:
    config = SecurityConfig.from_properties(
        {
            "bootstrap.servers": "h:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.location": str(pems["ca"]),
            "ssl.truststore.type": "PEM",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert config == SecurityConfig(
        protocol=SASL_SSL,
        sasl_mechanism=SCRAM_SHA_512,
        username="alice",
        password="s3cret",
        ca_file=pems["ca"],
        check_hostname=False,
    )


def test_plain_login_module_goes_with_plain() -> None:
    config = SecurityConfig.from_properties(
        {"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS}
    )
    assert (config.sasl_mechanism, config.username, config.password) == (PLAIN, "bob", "pw")


def test_librdkafka_names(pems: dict[str, Path]) -> None:
    config = SecurityConfig.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "carol",
            "sasl.password": "pw",
            "ssl.ca.location": str(pems["ca"]),
            "ssl.certificate.location": str(pems["cert"]),
            "ssl.key.location": str(pems["key"]),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert config == SecurityConfig(
        protocol=SASL_SSL,
        sasl_mechanism=SCRAM_SHA_256,
        username="carol",
        password="pw",
        ca_file=pems["ca"],
        check_hostname=False,
        cert_file=pems["cert"],
        key_file=pems["key"],
    )


def test_keystore_in_one_pem(pems: dict[str, Path]) -> None:
    config = SecurityConfig.from_properties(
        {
            "security.protocol": "SSL",
            "ssl.keystore.location": str(pems["combined"]),
            "ssl.keystore.type": "pem",
        }
    )
    assert (config.cert_file, config.key_file) == (pems["combined"], None)


def test_non_security_properties_are_not_its_business() -> None:
    assert (
        SecurityConfig.from_properties(
            {"bootstrap.servers": "h:1", "client.id": "x", "zookeeper.digest": "a:b"}
        )
        == SecurityConfig()
    )


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"ssl.truststore.type": "JKS"}, r"ssl\.truststore\.type=JKS: only PEM is supported"),
        ({"ssl.keystore.type": "PKCS12"}, r"ssl\.keystore\.type=PKCS12: only PEM"),
        ({"sasl.mechanism": "GSSAPI"}, r"sasl\.mechanism=GSSAPI: supported mechanisms are"),
        ({"sasl.mechanisms": "OAUTHBEARER"}, r"sasl\.mechanisms=OAUTHBEARER"),
        ({"security.protocol": "TLS"}, r"security\.protocol=TLS"),
        ({"ssl.truststore.password": "x"}, r"ssl\.truststore\.password is not supported"),
        ({"ssl.keystore.password": "x"}, r"ssl\.keystore\.password.*encrypted keys"),
        ({"ssl.key.password": "x"}, r"ssl\.key\.password.*encrypted keys"),
        ({"sasl.kerberos.service.name": "kafka"}, r"sasl\.kerberos\.service\.name.*Kerberos"),
        ({"sasl.oauthbearer.token.endpoint.url": "u"}, r"sasl\.oauthbearer\..*OAUTHBEARER"),
        ({"ssl.keymanager.algorithm": "SunX509"}, r"ssl\.keymanager\.algorithm is not supported"),
        ({"ssl.enabled.protocols": "TLSv1.3"}, r"ssl\.enabled\.protocols.*TLS 1\.2"),
        ({"enable.ssl.certificate.verification": "false"}, r"enable\.ssl\.certificate\.verif"),
        ({"ssl.crl.location": "x"}, r"ssl\.crl\.location is not a security setting replog"),
        ({"security.providers": "x"}, r"security\.providers is not a security setting"),
        ({"ssl.endpoint.identification.algorithm": "http"}, r"identification\.algorithm=http"),
    ],
)
def test_unsupported_security_settings_are_named(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SecurityConfig.from_properties({"security.protocol": "SASL_SSL", **props})


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"ssl.truststore.location": "/ca.pem"}, r"ssl\.truststore\.location is set but"),
        ({"sasl.jaas.config": SCRAM_JAAS}, r"sasl\.jaas\.config is set but"),
        ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}, r"sasl\.mechanism is set but"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.jaas.config": SCRAM_JAAS,
                "ssl.ca.location": "/ca.pem",
            },
            r"ssl\.ca\.location is set but security\.protocol=SASL_PLAINTEXT",
        ),
    ],
)
def test_settings_the_protocol_would_not_use_are_refused(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SecurityConfig.from_properties(props)


@pytest.mark.parametrize(
    ("props", "named"),
    [
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS},
            r"uses ScramLoginModule, which does not go with sasl\.mechanism=PLAIN",
        ),
        ({"sasl.jaas.config": PLAIN_JAAS}, r"PlainLoginModule.*SCRAM-SHA-256 \(the default\)"),
        (
            {"sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256"},
            r"sasl\.mechanism and sasl\.mechanisms differ",
        ),
        (
            {"sasl.jaas.config": SCRAM_JAAS, "sasl.username": "x"},
            r"either in sasl\.jaas\.config or in sasl\.username",
        ),
        ({"sasl.username": "x"}, "needs a username and a password"),
    ],
)
def test_conflicting_sasl_settings(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SecurityConfig.from_properties({"security.protocol": "SASL_SSL", **props})


# --- sasl.jaas.config ---


def test_jaas_quoted_values_with_escapes_and_bare_words() -> None:
    module, options = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '  username=alice password="a \\"quoted\\" pass\\\\word; = x" ;'
    )
    assert module.endswith("ScramLoginModule")
    assert options == {"username": "alice", "password": 'a "quoted" pass\\word; = x'}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
            "login module com.sun.security.auth.module.Krb5LoginModule is not supported",
        ),
        (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "OAuthBearerLoginModule is not supported",
        ),
        (SCRAM_JAAS.rstrip(";"), "expected"),
        (SCRAM_JAAS.replace("required", "mandatory"), "control flag"),
        (SCRAM_JAAS.replace('username="alice"', 'tokenauth="true"'), "option tokenauth"),
        (SCRAM_JAAS.replace('username="alice"', 'password="x"'), "option password is given twice"),
        (SCRAM_JAAS.replace('="alice"', ""), 'key="value" pairs'),
        ('org.apache.kafka.common.security.scram.ScramLoginModule required password="x;', "quote"),
    ],
)
def test_bad_jaas_config_is_named(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        SecurityConfig.from_properties({"security.protocol": "SASL_SSL", "sasl.jaas.config": text})
    assert "s3cret" not in str(caught.value)


# --- Spark options ---


def test_spark_options_with_either_prefix(pems: dict[str, Path]) -> None:
    config = SecurityConfig.from_spark_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_SSL",
            "replog.sasl.mechanism": "SCRAM-SHA-256",
            "Kafka.SASL.JAAS.Config": SCRAM_JAAS,
            "kafka.ssl.truststore.location": str(pems["ca"]),
            "replog.ssl.truststore.location": str(pems["ca"]),
            "kafka.ssl.truststore.type": "PEM",
        }
    )
    assert (config.protocol, config.username, config.ca_file) == (SASL_SSL, "alice", pems["ca"])


def test_spark_options_name_the_option_as_given() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.ssl\.truststore\.type=JKS: only PEM"):
        SecurityConfig.from_spark_options(
            {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS"}
        )
    with pytest.raises(ConfigError, match=r"replog\.sasl\.mechanism=GSSAPI"):
        SecurityConfig.from_spark_options({"replog.sasl.mechanism": "GSSAPI"})


def test_spark_options_given_twice_differently() -> None:
    with pytest.raises(
        ConfigError,
        match=r"kafka\.security\.protocol and replog\.security\.protocol have different values",
    ):
        SecurityConfig.from_spark_options(
            {"kafka.security.protocol": "SSL", "replog.security.protocol": "SASL_SSL"}
        )


def test_spark_options_without_security_are_plaintext() -> None:
    options = {"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "5", "topic": "t"}
    assert SecurityConfig.from_spark_options(options) == SecurityConfig()


# --- .properties files ---


def test_load_properties_java_syntax(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# a comment\n"
        "! another\n"
        "\n"
        "security.protocol=SASL_SSL\n"
        "  sasl.mechanism : SCRAM-SHA-512\n"
        "ssl.truststore.location /etc/ca.pem\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" \\\n'
        '    password="p=w:d";\n'
        "key\\ with\\ spaces=v\\u00e9\n"
        "empty=\n"
    )
    props = load_properties(path)
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.truststore.location": "/etc/ca.pem",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="p=w:d";'
        ),
        "key with spaces": "v\u00e9",
        "empty": "",
    }
    config = SecurityConfig.from_properties(props)
    assert (config.username, config.password) == ("admin", "p=w:d")


def test_load_properties_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=str(tmp_path / "missing.properties")):
        load_properties(tmp_path / "missing.properties")
