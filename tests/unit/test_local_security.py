"""The files `replog up --security MODE` writes: modes, contents, reuse, and that the
broker's and the client's own settings parsers accept them."""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import pytest
from cryptography import x509

from brokerd.config.security import BrokerSecurity
from spark_replica.errors import ConfigError
from spark_replica.security.settings import SecurityConfig, load_properties
from spark_replica.tools.cli.common import client_properties, client_security
from spark_replica.tools.cli.main import build_parser, main
from spark_replica.tools.launcher import cluster_dir, local_security
from spark_replica.tools.launcher.local_security import prepare, render_properties


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _common_name(keystore: Path) -> str:
    cert = x509.load_pem_x509_certificate(keystore.read_bytes())
    return str(cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


def test_sasl_ssl_files_are_private_and_name_the_admin(tmp_path: Path) -> None:
    local = prepare(tmp_path, "sasl_ssl", [1, 2, 3], ["127.0.0.1"])
    assert _mode(local.security_dir) == 0o700
    private = [
        local.admin_properties,
        local.ca.key,
        local.security_dir / local_security.SECRETS_FILE,
        *(local.broker_keystore(i) for i in (1, 2, 3)),
        *(local.broker_config_file(i) for i in (1, 2, 3)),
    ]
    assert {path.name: _mode(path) for path in private} == {path.name: 0o600 for path in private}
    assert not local.admin_client_cert.exists()

    admin = SecurityConfig.from_properties(load_properties(local.admin_properties))
    assert (admin.protocol, admin.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-256")
    assert (admin.username, admin.password) == ("admin", local.secrets.admin_password)
    assert admin.ca_file == local.ca.cert and admin.cert_file is None
    props = load_properties(local.admin_properties)
    assert props["zookeeper.digest"] == f"broker:{local.secrets.zookeeper_password}"
    assert local.secrets.admin_password not in repr(local)


def test_broker_config_files_are_accepted_by_the_broker(tmp_path: Path) -> None:
    local = prepare(tmp_path, "sasl_ssl", [1, 2], ["127.0.0.1"])
    props = load_properties(local.broker_config_file(2))
    assert props == local_security.broker_properties(local, 2)
    security = BrokerSecurity().with_settings(props)
    assert security.protocol == "SASL_SSL" and security.client_auth == "none"
    assert security.keystore == local.broker_keystore(2)
    assert security.super_users == {"User:admin", "User:broker"}
    assert security.authorizer and not security.allow_everyone_if_no_acl_found
    assert security.zookeeper_login == f"broker:{local.secrets.zookeeper_password}"
    assert security.server_ssl_context() is not None
    inter_broker = security.inter_broker()
    assert inter_broker is not None
    assert (inter_broker.username, inter_broker.sasl_mechanism) == ("broker", "SCRAM-SHA-512")
    assert _common_name(local.broker_keystore(2)) == "broker"


def test_ssl_mode_uses_client_certificates_and_no_sasl(tmp_path: Path) -> None:
    local = prepare(tmp_path, "ssl", [1], ["127.0.0.1"])
    admin = SecurityConfig.from_properties(load_properties(local.admin_properties))
    assert admin.protocol == "SSL" and admin.username is None
    assert admin.cert_file == local.admin_client_cert
    assert _common_name(local.admin_client_cert) == "admin"
    assert _mode(local.admin_client_cert) == 0o600
    broker = BrokerSecurity().with_settings(load_properties(local.broker_config_file(1)))
    assert broker.client_auth == "required" and not broker.uses_sasl
    inter_broker = broker.inter_broker()
    assert inter_broker is not None and inter_broker.cert_file == local.broker_keystore(1)


def test_sasl_plaintext_mode_makes_no_certificates(tmp_path: Path) -> None:
    local = prepare(tmp_path, "sasl_plaintext", [1], [])
    assert not local.ca.cert.exists() and not local.broker_keystore(1).exists()
    props = load_properties(local.broker_config_file(1))
    assert not any(key.startswith("ssl.") for key in props)
    admin = SecurityConfig.from_properties(load_properties(local.admin_properties))
    assert admin.protocol == "SASL_PLAINTEXT" and admin.ca_file is None


def test_a_later_up_reuses_secrets_ca_and_certificates(tmp_path: Path) -> None:
    first = prepare(tmp_path, "sasl_ssl", [1, 2], [])
    ca, keystore = first.ca.cert.read_bytes(), first.broker_keystore(1).read_bytes()
    first.admin_properties.unlink()
    again = prepare(tmp_path, "sasl_ssl", [1, 2], [])
    assert again.secrets == first.secrets
    assert again.ca.cert.read_bytes() == ca
    assert again.broker_keystore(1).read_bytes() == keystore
    assert again.admin_properties.is_file()


def test_a_new_ca_reissues_every_certificate(tmp_path: Path) -> None:
    first = prepare(tmp_path, "sasl_ssl", [1], [])
    keystore = first.broker_keystore(1).read_bytes()
    first.ca.key.unlink()
    again = prepare(tmp_path, "sasl_ssl", [1], [])
    assert again.broker_keystore(1).read_bytes() != keystore


def test_plaintext_and_unknown_modes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no security files"):
        prepare(tmp_path, "plaintext", [1])
    with pytest.raises(ConfigError, match="unknown security mode 'tls'"):
        prepare(tmp_path, "tls", [1])


def test_damaged_secrets_file_is_a_config_error(tmp_path: Path) -> None:
    local = prepare(tmp_path, "sasl_plaintext", [1])
    (local.security_dir / local_security.SECRETS_FILE).write_text("{")
    with pytest.raises(ConfigError, match="not a readable secrets file"):
        prepare(tmp_path, "sasl_plaintext", [1])


@pytest.mark.parametrize(
    "value", ["C:\\keys\\a.pem", " leading space", "two\nlines", 'a "quoted" = value;']
)
def test_rendered_properties_read_back_as_written(tmp_path: Path, value: str) -> None:
    path = tmp_path / "x.properties"
    path.write_text(render_properties({"some.key": value, "other": "plain"}))
    assert load_properties(path) == {"some.key": value, "other": "plain"}


def test_cluster_file_without_a_security_mode_is_plaintext(tmp_path: Path) -> None:
    document = {"zookeeper": "127.0.0.1:2181", "embedded_zookeeper": None, "brokers": []}
    (tmp_path / cluster_dir.CLUSTER_FILE).write_text(json.dumps(document))
    info = cluster_dir.load(tmp_path)
    assert info.security == "plaintext" and not info.secure
    info.security = "sasl_ssl"
    cluster_dir.save(tmp_path, info)
    assert cluster_dir.load(tmp_path).secure
    document["security"] = "tls"
    (tmp_path / cluster_dir.CLUSTER_FILE).write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="unknown security mode 'tls'"):
        cluster_dir.load(tmp_path)


def _cli_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["topics", "list", *argv])


def test_cli_uses_the_directorys_admin_properties_unless_told_otherwise(tmp_path: Path) -> None:
    local = prepare(tmp_path, "sasl_plaintext", [1])
    from_dir = client_security(_cli_args("--dir", str(tmp_path)))
    assert (from_dir.protocol, from_dir.username) == ("SASL_PLAINTEXT", "admin")
    assert client_security(_cli_args("--bootstrap", "127.0.0.1:9092")).protocol == "PLAINTEXT"
    alice = tmp_path / "alice.properties"
    alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.username=alice\nsasl.password=pw\n")
    chosen = client_security(_cli_args("--dir", str(tmp_path), "--command-config", str(alice)))
    assert chosen.username == "alice"
    digest = client_properties(_cli_args("--dir", str(tmp_path)))["zookeeper.digest"]
    assert digest == local.secrets.zookeeper_digest
    assert client_security(_cli_args("--dir", str(tmp_path / "none"))).protocol == "PLAINTEXT"


def test_cli_bad_command_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    argv = ["topics", "list", "--bootstrap", "127.0.0.1:9", "--command-config", str(bad)]
    assert main(argv) == 2
    assert "GSSAPI" in capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "missing.properties")]) == 2
