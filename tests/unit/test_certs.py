"""The local CA's certificates verify with Python's ssl in a real TLS handshake on 127.0.0.1."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_replica.errors import ConfigError
from spark_replica.security.certs import (
    CaFiles,
    issue_client_cert,
    issue_server_cert,
    make_ca,
    write_private_file,
)

HANDSHAKE_TIMEOUT_S = 10.0


def _server_context(keystore: Path, ca: CaFiles | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(keystore)
    if ca is not None:
        context.load_verify_locations(ca.cert)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _client_context(ca: CaFiles, keystore: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert)
    if keystore is not None:
        context.load_cert_chain(keystore)
    return context


@dataclass
class Handshake:
    client_error: Exception | None = None
    server_error: Exception | None = None
    peer_common_name: str | None = None  # the client certificate's CN, as the server saw it


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str) -> Handshake:
    """Run one handshake and a two-byte exchange; record what each side saw."""
    result = Handshake()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(HANDSHAKE_TIMEOUT_S)
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            conn.settimeout(HANDSHAKE_TIMEOUT_S)
            try:
                with server.wrap_socket(conn, server_side=True) as tls:
                    peer = tls.getpeercert()
                    subject = dict(item[0] for item in peer["subject"]) if peer else {}
                    result.peer_common_name = subject.get("commonName")
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError) as exc:
                result.server_error = exc
                conn.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=HANDSHAKE_TIMEOUT_S)
            with raw, client.wrap_socket(raw, server_hostname=server_hostname) as tls:
                if tls.recv(2) != b"ok":
                    raise ConnectionError("the server closed the connection")
        except (ssl.SSLError, OSError) as exc:
            result.client_error = exc
        finally:
            thread.join(HANDSHAKE_TIMEOUT_S)
    assert not thread.is_alive()
    return result


def _succeeds(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str) -> str | None:
    result = _handshake(server, client, server_hostname)
    assert result.client_error is None and result.server_error is None, result
    return result.peer_common_name


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CaFiles:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def server_keystore(ca: CaFiles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("server") / "broker-1.pem"
    return issue_server_cert(ca, path, hosts=["broker1.example", "10.1.2.3"], common_name="broker")


@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost", "broker1.example", "10.1.2.3"])
def test_server_cert_verifies_for_each_of_its_names(
    ca: CaFiles, server_keystore: Path, hostname: str
) -> None:
    assert _succeeds(_server_context(server_keystore), _client_context(ca), hostname) is None


def test_hostname_not_in_the_certificate_is_refused(ca: CaFiles, server_keystore: Path) -> None:
    result = _handshake(_server_context(server_keystore), _client_context(ca), "other.example")
    assert isinstance(result.client_error, ssl.SSLCertVerificationError)
    assert "mismatch" in str(result.client_error)


def test_certificate_from_another_ca_is_refused(
    ca: CaFiles, server_keystore: Path, tmp_path: Path
) -> None:
    other = make_ca(tmp_path / "other")
    result = _handshake(_server_context(server_keystore), _client_context(other), "127.0.0.1")
    assert isinstance(result.client_error, ssl.SSLCertVerificationError)
    assert "certificate verify failed" in str(result.client_error)


def test_client_certificate_names_its_holder_to_the_server(
    ca: CaFiles, server_keystore: Path, tmp_path: Path
) -> None:
    client_keystore = issue_client_cert(ca, tmp_path / "admin-client.pem", "admin")
    server = _server_context(server_keystore, ca=ca)
    assert _succeeds(server, _client_context(ca, client_keystore), "localhost") == "admin"


def test_server_certificate_also_serves_as_its_holders_client_certificate(
    ca: CaFiles, server_keystore: Path
) -> None:
    server = _server_context(server_keystore, ca=ca)
    assert _succeeds(server, _client_context(ca, server_keystore), "localhost") == "broker"


def test_client_certificate_from_another_ca_is_refused_by_the_server(
    ca: CaFiles, server_keystore: Path, tmp_path: Path
) -> None:
    other = make_ca(tmp_path / "other")
    stranger = issue_client_cert(other, tmp_path / "stranger.pem", "admin")
    server = _server_context(server_keystore, ca=ca)
    result = _handshake(server, _client_context(ca, stranger), "localhost")
    assert isinstance(result.server_error, ssl.SSLCertVerificationError)
    assert result.client_error is not None
    assert result.peer_common_name is None


def test_keys_are_readable_by_the_owner_alone(ca: CaFiles, server_keystore: Path) -> None:
    assert stat.S_IMODE(ca.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(server_keystore.stat().st_mode) == 0o600
    assert "PRIVATE KEY" not in ca.cert.read_text()
    keystore = server_keystore.read_text()
    assert keystore.index("PRIVATE KEY") < keystore.index("CERTIFICATE")
    assert keystore.count("BEGIN CERTIFICATE") == 2


def test_private_file_replaced_keeps_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "secret.properties"
    path.write_text("old")
    path.chmod(0o644)
    write_private_file(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret.properties"]


def test_missing_ca_is_a_config_error(tmp_path: Path) -> None:
    missing = CaFiles(cert=tmp_path / "ca.pem", key=tmp_path / "ca-key.pem")
    with pytest.raises(ConfigError, match="cannot read the CA"):
        issue_client_cert(missing, tmp_path / "c.pem", "admin")


def test_empty_common_name_is_a_config_error(ca: CaFiles, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="common name"):
        issue_client_cert(ca, tmp_path / "c.pem", "")
