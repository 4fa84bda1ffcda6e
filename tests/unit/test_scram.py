"""SCRAM and SASL/PLAIN as pure functions: RFC 7677's vector, failures, malicious peers."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from spark_replica.errors import (
    AuthenticationError,
    ConfigError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
)
from spark_replica.security.scram import (
    INVALID_CREDENTIALS,
    MIN_ITERATIONS,
    ScramClient,
    ScramCredential,
    ScramServer,
    credential_from_salted_password,
    escape_username,
    fake_credential,
    make_credential,
    new_fake_key,
    parse_plain,
    plain_credential,
    plain_message,
    salted_password,
    unescape_username,
    verify_password,
)

# RFC 7677 section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLUSTER_KEY = b"k" * 32


def rfc_credential() -> ScramCredential:
    return make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)


def exchange(
    mechanism: str,
    username: str,
    password: str,
    credential: ScramCredential | None,
) -> tuple[ScramClient, ScramServer, bytes]:
    """Run a whole exchange (None: an unknown user, shown its fake credential); returns
    the parties and the server-final message."""
    client = ScramClient(mechanism, username, password)
    server = ScramServer(mechanism)
    assert server.receive_client_first(client.first_message()) == username
    if credential is None:
        shown = fake_credential(CLUSTER_KEY, mechanism, username)
        final = client.final_message(server.server_first(shown, exists=False))
    else:
        final = client.final_message(server.server_first(credential))
    return client, server, server.receive_client_final(final)


def test_client_matches_rfc_7677_vector() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)


def test_server_matches_rfc_7677_vector() -> None:
    server = ScramServer("SCRAM-SHA-256", nonce=RFC_SERVER_NONCE)
    assert server.receive_client_first(RFC_CLIENT_FIRST) == "user"
    assert server.server_first(rfc_credential()) == RFC_SERVER_FIRST
    assert server.receive_client_final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_full_exchange_succeeds_and_client_verifies_server(mechanism: str) -> None:
    credential = make_credential(mechanism, "s3cret")
    client, _, server_final = exchange(mechanism, "alice", "s3cret", credential)
    client.verify_server_final(server_final)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_fails_with_invalid_credentials(mechanism: str) -> None:
    credential = make_credential(mechanism, "right")
    with pytest.raises(SaslAuthenticationFailedError, match=INVALID_CREDENTIALS):
        exchange(mechanism, "alice", "wrong", credential)


def test_unknown_user_fails_at_the_final_step_exactly_like_a_wrong_password() -> None:
    with pytest.raises(SaslAuthenticationFailedError) as unknown:
        exchange("SCRAM-SHA-256", "nobody", "pw", None)
    with pytest.raises(SaslAuthenticationFailedError) as wrong:
        exchange("SCRAM-SHA-256", "alice", "wrong", make_credential("SCRAM-SHA-256", "x"))
    assert str(unknown.value) == str(wrong.value)


def test_a_credential_shown_as_fake_never_authenticates_even_with_the_right_proof() -> None:
    credential = make_credential("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "ghost", "pw")
    server.receive_client_first(client.first_message())
    final = client.final_message(server.server_first(credential, exists=False))
    with pytest.raises(SaslAuthenticationFailedError, match=INVALID_CREDENTIALS):
        server.receive_client_final(final)


def test_unknown_users_see_a_salt_fixed_by_the_cluster_key_shaped_like_a_real_one() -> None:
    def first_reply(username: str, key: bytes = CLUSTER_KEY) -> dict[str, str]:
        server = ScramServer("SCRAM-SHA-256")
        server.receive_client_first(ScramClient("SCRAM-SHA-256", username, "pw").first_message())
        shown = fake_credential(key, "SCRAM-SHA-256", username)
        text = server.server_first(shown, exists=False).decode()
        return dict(part.split("=", 1) for part in text.split(","))

    first, again, other = first_reply("ghost"), first_reply("ghost"), first_reply("ghost2")
    assert first["s"] == again["s"] != other["s"]
    assert first_reply("ghost", new_fake_key())["s"] != first["s"]
    real = make_credential("SCRAM-SHA-256", "pw")
    assert len(base64.b64decode(first["s"])) == len(real.salt)
    assert first["i"] == str(real.iterations) == str(MIN_ITERATIONS)


def test_server_rejects_a_forged_server_signature() -> None:
    credential = make_credential("SCRAM-SHA-256", "pw")
    client, _, _ = exchange("SCRAM-SHA-256", "alice", "pw", credential)
    forged = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(SaslAuthenticationFailedError, match="signature"):
        client.verify_server_final(forged)


def test_server_error_reply_fails_the_client_with_its_text() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.final_message(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        client.verify_server_final(b"e=invalid-proof")


@pytest.mark.parametrize(
    "server_first",
    [
        b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # nonce not ours
        b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # nothing added
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",  # downgrade
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000000000",  # spin
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=not base64!,i=4096",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=x",
        b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,m=ext",
        b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096",
        b"\xff\xfe",
        b"",
    ],
)
def test_client_refuses_bad_or_malicious_server_first(server_first: bytes) -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    with pytest.raises(SaslAuthenticationFailedError):
        client.final_message(server_first)


@pytest.mark.parametrize(
    "client_first",
    [
        b"p=tls-unique,,n=user,r=abc",  # channel binding asked for
        b"x,,n=user,r=abc",
        b"n,,r=abc,n=user",
        b"n,,n=,r=abc",
        b"n,,n=bad=escape,r=abc",
        b"n,a=other,n=user,r=abc",
        b"n,,n=user,r=a,b",
        b"n,,n=user,r=abc,m=mandatory",
        b"n,,n=user",
        b"garbage",
        b"\xc3\x28",
    ],
)
def test_server_refuses_malformed_client_first(client_first: bytes) -> None:
    with pytest.raises(SaslAuthenticationFailedError):
        ScramServer("SCRAM-SHA-256").receive_client_first(client_first)


def test_server_accepts_y_flag_and_matching_authzid_as_no_binding() -> None:
    credential = make_credential("SCRAM-SHA-256", "pw")
    for header in ("y,,", "n,a=alice,"):
        client = ScramClient("SCRAM-SHA-256", "alice", "pw")
        server = ScramServer("SCRAM-SHA-256")
        bare = client.first_message().removeprefix(b"n,,")
        server.receive_client_first(header.encode() + bare)
        # The client's final message binds "n,,", which is not what it announced here.
        with pytest.raises(SaslAuthenticationFailedError, match="channel binding"):
            server.receive_client_final(client.final_message(server.server_first(credential)))


@pytest.mark.parametrize(
    "tamper",
    [
        lambda final: final.replace(b"c=biws", b"c=eSws"),  # binding changed
        lambda final: final.replace(b",p=", b"x,p="),  # nonce changed
        lambda final: final.rsplit(b",p=", 1)[0],  # no proof
        lambda final: final.rsplit(b",p=", 1)[0] + b",p=***",
        lambda final: final.rsplit(b",p=", 1)[0] + b",p=" + base64.b64encode(b"short"),
    ],
)
def test_server_refuses_tampered_client_final(tamper: Callable[[bytes], bytes]) -> None:
    credential = make_credential("SCRAM-SHA-256", "pw")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256")
    server.receive_client_first(client.first_message())
    final = client.final_message(server.server_first(credential))
    with pytest.raises(SaslAuthenticationFailedError):
        server.receive_client_final(tamper(final))


def test_messages_out_of_order_are_illegal_sasl_state() -> None:
    server = ScramServer("SCRAM-SHA-256")
    with pytest.raises(IllegalSaslStateError):
        server.server_first(make_credential("SCRAM-SHA-256", "pw"))
    with pytest.raises(IllegalSaslStateError):
        server.receive_client_final(b"c=biws,r=x,p=AAAA")
    credential = make_credential("SCRAM-SHA-256", "pw")
    _, server, _ = exchange("SCRAM-SHA-256", "alice", "pw", credential)
    with pytest.raises(IllegalSaslStateError):
        server.receive_client_final(b"c=biws,r=x,p=AAAA")
    with pytest.raises(IllegalSaslStateError):
        ScramClient("SCRAM-SHA-256", "a", "b").verify_server_final(b"v=AAAA")


def test_auth_failures_are_authentication_errors() -> None:
    assert issubclass(SaslAuthenticationFailedError, AuthenticationError)


@pytest.mark.parametrize("username", ["a,b", "a=b", "=2C", ",=,", "plain"])
def test_usernames_with_commas_and_equals_survive_the_exchange(username: str) -> None:
    assert unescape_username(escape_username(username)) == username
    credential = make_credential("SCRAM-SHA-512", "pw")
    client, _, server_final = exchange("SCRAM-SHA-512", username, "pw", credential)
    client.verify_server_final(server_final)


def test_escaped_username_on_the_wire() -> None:
    first = ScramClient("SCRAM-SHA-256", "a,b=c", "pw", nonce="abc").first_message()
    assert first == b"n,,n=a=2Cb=3Dc,r=abc"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_credential_encode_decode_round_trip(mechanism: str) -> None:
    credential = make_credential(mechanism, "pw", iterations=8192)
    text = credential.encode()
    assert text.startswith("salt=") and text.endswith(",iterations=8192")
    assert "stored_key=" in text and "server_key=" in text
    assert ScramCredential.decode(mechanism, text) == credential


def test_credential_repr_hides_the_keys() -> None:
    credential = make_credential("SCRAM-SHA-256", "pw")
    assert base64.b64encode(credential.stored_key).decode() not in repr(credential)
    assert "stored_key" not in repr(credential)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AAAA",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096",  # keys too short
        "salt=!!!,stored_key={k},server_key={k},iterations=4096",
        "salt=AAAA,stored_key={k},server_key={k},iterations=4095",
        "salt=AAAA,stored_key={k},server_key={k},iterations=-1",
        "salt=AAAA,stored_key={k},server_key={k},iterations=4096,extra=1",
        "salt=AAAA,salt=AAAA,stored_key={k},server_key={k},iterations=4096",
        "salt=,stored_key={k},server_key={k},iterations=4096",
        "garbage",
    ],
)
def test_decode_rejects_bad_text_with_config_error(text: str) -> None:
    key = base64.b64encode(b"k" * 32).decode()
    with pytest.raises(ConfigError):
        ScramCredential.decode("SCRAM-SHA-256", text.format(k=key))


def test_unknown_mechanism_is_config_error_naming_valid_ones() -> None:
    with pytest.raises(ConfigError, match="SCRAM-SHA-256"):
        make_credential("SCRAM-SHA-1", "pw")
    with pytest.raises(ConfigError, match="SCRAM-SHA-512"):
        ScramServer("GSSAPI")


@pytest.mark.parametrize("iterations", [1, 4095, 16385])
def test_make_credential_rejects_iterations_out_of_range(iterations: int) -> None:
    with pytest.raises(ConfigError, match="iterations"):
        make_credential("SCRAM-SHA-256", "pw", iterations=iterations)


def test_credential_from_salted_password_equals_make_credential() -> None:
    salt = b"0123456789abcdef"
    salted = salted_password("SCRAM-SHA-512", "pw", salt, 4096)
    assert credential_from_salted_password("SCRAM-SHA-512", salt, salted, 4096) == (
        make_credential("SCRAM-SHA-512", "pw", 4096, salt)
    )
    with pytest.raises(ConfigError):
        credential_from_salted_password("SCRAM-SHA-512", salt, salted[:10], 4096)


def test_verify_password() -> None:
    credential = rfc_credential()
    assert verify_password(credential, "pencil")
    assert not verify_password(credential, "pencil2")
    assert not verify_password(credential, "")


def test_plain_checks_against_a_real_credential_or_a_fake_one() -> None:
    sha256 = make_credential("SCRAM-SHA-256", "pw")
    sha512 = make_credential("SCRAM-SHA-512", "pw")
    both = {"SCRAM-SHA-256": sha256, "SCRAM-SHA-512": sha512}
    assert plain_credential(both, CLUSTER_KEY, "alice") == (sha512, True)
    assert plain_credential({"SCRAM-SHA-256": sha256}, CLUSTER_KEY, "alice") == (sha256, True)
    fake, exists = plain_credential({}, CLUSTER_KEY, "ghost")
    assert not exists
    assert fake == fake_credential(CLUSTER_KEY, "SCRAM-SHA-512", "ghost")


def test_plain_round_trip_and_authzid() -> None:
    assert parse_plain(plain_message("alice", "pw")) == ("alice", "pw")
    assert parse_plain(b"alice\0alice\0pw") == ("alice", "pw")
    assert parse_plain("\0j\u00f6rg\0p\u00e4ss".encode()) == ("j\u00f6rg", "p\u00e4ss")


@pytest.mark.parametrize(
    "message",
    [b"", b"alice", b"\0alice", b"\0\0pw", b"\0alice\0", b"a\0b\0c\0d", b"bob\0alice\0pw", b"\xff"],
)
def test_parse_plain_rejects_malformed(message: bytes) -> None:
    with pytest.raises(SaslAuthenticationFailedError):
        parse_plain(message)


@pytest.mark.parametrize(("username", "password"), [("", "pw"), ("a", ""), ("a\0b", "pw")])
def test_plain_message_rejects_bad_input(username: str, password: str) -> None:
    with pytest.raises(ConfigError):
        plain_message(username, password)
