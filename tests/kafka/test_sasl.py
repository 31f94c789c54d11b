"""SASL PLAIN on the Kafka listener (``broker.kafka.sasl``), over an in-memory broker whose
Kafka factory has ``auth.tokens_file``'s users: before the login only ApiVersions and
SaslHandshake are served, anything else closes the connection without a reply; the
handshake offers PLAIN only; a good token is answered by an empty frame and the connection
works as any other; a bad or malformed one closes it after the 0.25 s failure delay; other
connections are unaffected. Without ``auth.tokens_file`` a SaslHandshake answers 34. The
real clients: tests/kafka/test_sasl_clients.py."""

from __future__ import annotations

import pytest

from broker.auth import TokenStore, hash_token
from broker.kafka.sasl import parse_plain
from tests.kafka.harness import Harness, i16, i32, request, string

TOKEN = "s3cr3t-token"


def plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    harness.service.factory.tokens = TokenStore({"alice": hash_token(TOKEN)})
    yield harness
    harness.close()


def login(conn, user: str = "alice", password: str = TOKEN) -> bytes:
    """Handshake + token; returns the raw bytes written in answer to the token."""
    assert conn.call(17, 0, string("PLAIN")) == i16(0) + i32(1) + string("PLAIN")
    conn.send_raw(i32(len(plain(user, password))) + plain(user, password))
    written = conn.transport.value()
    conn.transport.clear()
    return written


def test_a_good_login_opens_the_connection(h):
    conn = h.connect()
    versions = conn.call(18, 0)  # allowed before the login: SaslHandshake v0-v1 and
    assert i16(17) + i16(0) + i16(1) in versions  # SaslAuthenticate v0-v2 listed
    assert i16(36) + i16(0) + i16(2) in versions
    assert login(conn) == b"\x00\x00\x00\x00"  # the empty frame: authenticated
    body = conn.call(3, 0, i32(1) + string("t1"))
    assert string("t1") in body and not conn.closed


def test_requests_before_the_login_close_the_connection(h):
    conn = h.connect()
    conn.send_raw(request(3, 0, 7, i32(1) + string("t1")))  # Metadata
    assert conn.responses() == [] and conn.closed
    assert h.core.topic_config("t1") is None  # the Metadata did not auto-create


def test_only_plain_is_offered(h):
    conn = h.connect()
    assert conn.call(17, 0, string("SCRAM-SHA-256")) == i16(33) + i32(1) + string("PLAIN")
    assert not conn.closed  # the client gives up; the broker does not need to


@pytest.mark.parametrize("token", [
    plain("alice", "wrong"),
    plain("mallory", TOKEN),
    plain("alice", TOKEN, authzid="bob"),  # acting for someone else
    b"alice" + b"\0" + TOKEN.encode(),     # not three fields
    b"\0alice\0\xff\xfe",                  # not UTF-8
])
def test_a_bad_login_closes_after_the_delay_and_others_go_on(h, token):
    other = h.connect()
    assert login(other) == b"\x00\x00\x00\x00"
    conn = h.connect()
    assert conn.call(17, 0, string("PLAIN"))[:2] == i16(0)
    conn.send_raw(i32(len(token)) + token)
    assert conn.transport.value() == b"" and not conn.closed  # no answer; waits 0.25 s
    conn.send_raw(request(3, 0, 8, i32(1) + string("t1")))  # ignored: it is closing
    h.advance(0.3)
    assert conn.closed and conn.transport.value() == b""
    assert h.core.topic_config("t1") is None
    assert string("t2") in other.call(3, 0, i32(1) + string("t2"))


def test_without_a_tokens_file_a_handshake_answers_34(tmp_path):
    h = Harness(tmp_path)
    conn = h.connect()
    assert conn.call(17, 0, string("PLAIN")) == i16(34) + i32(0)
    assert string("t1") in conn.call(3, 0, i32(1) + string("t1"))
    h.close()


def test_parse_plain():
    assert parse_plain(b"\0alice\0pw") == ("", "alice", "pw")
    assert parse_plain(b"alice\0alice\0pw") == ("alice", "alice", "pw")
    for bad in (b"", b"\0\0pw", b"\0alice\0", b"a\0b", b"a\0b\0c\0d"):
        assert parse_plain(bad) is None


def test_the_advertised_address_is_what_metadata_and_find_coordinator_name(tmp_path):
    """kafka.advertised (Kafka's advertised.listeners) replaces the bound address in
    Metadata and FindCoordinator; a wildcard host without it refuses to listen."""
    from twisted.internet.testing import MemoryReactor

    h = Harness(tmp_path, {"kafka": {"advertised": "kafka.example:19092"}})
    h.service.ctx.groups = h.broker.kafka_groups
    h.service.listen(MemoryReactor(), "127.0.0.1", 0)
    conn = h.connect()
    assert conn.call(3, 0, i32(0)).startswith(i32(1) + i32(0) + string("kafka.example")
                                              + i32(19092))
    assert conn.call(10, 0, string("g")) == i16(0) + i32(0) + string("kafka.example") + i32(19092)
    h.close()

    bare = Harness(tmp_path / "b")
    with pytest.raises(ValueError, match="kafka.advertised: required with host '0.0.0.0'"):
        bare.service.listen(MemoryReactor(), "0.0.0.0", 0)
    bare.service.listen(MemoryReactor(), "127.0.0.1", 0)  # a real address: fine without
    bare.close()


@pytest.mark.parametrize("value", ["nohost", "h:0", "h:99999", ":9092", "h:port"])
def test_a_malformed_advertised_address_is_a_config_error(value):
    from broker.config import ConfigError, config_from_mapping

    with pytest.raises(ConfigError, match="^kafka.advertised"):
        config_from_mapping({"kafka_port": 0, "kafka": {"advertised": value}})
    assert config_from_mapping({"kafka": {"advertised": "[::1]:9093"}})["kafka.advertised"]


def test_the_handshake_codec_golden_bytes():
    """SaslHandshake v0 as kafka-python and librdkafka send it, and the reply's layout:
    error_code int16, enabled_mechanisms [string]."""
    from broker.kafka import codec as c

    frame = bytes.fromhex("0011 0000 00000003 0002 6b70 0005 504c41494e".replace(" ", ""))
    request = c.parse_request(frame)
    assert isinstance(request, c.SaslHandshakeRequest) and request.mechanism == "PLAIN"
    assert c.encode_response(request.header, c.SaslHandshakeResponse(0, ("PLAIN",))) == \
        bytes.fromhex("00000011 00000003 0000 00000001 0005 504c41494e".replace(" ", ""))
    assert isinstance(c.parse_request(frame + b"x"), c.MalformedRequest)


def authenticate(conn, version: int, token: bytes) -> bytes:
    """Handshake v1, then the token in a SaslAuthenticate at ``version`` (flexible from
    v2: header v2, compact bytes, tags); the answer's body (with its tags byte)."""
    assert conn.call(17, 1, string("PLAIN")) == i16(0) + i32(1) + string("PLAIN")
    if version >= 2:
        body = b"\x00" + bytes([len(token) + 1]) + token + b"\x00"
    else:
        body = i32(len(token)) + token
    return conn.call(36, version, body)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_handshake_v1_then_sasl_authenticate(h, version):
    """KIP-152's exchange: the token inside SaslAuthenticate; a good one answers error 0,
    empty auth bytes (and v1+'s session lifetime 0: none), then the connection is open."""
    conn = h.connect()
    answer = authenticate(conn, version, plain("alice", TOKEN))
    expected = {0: i16(0) + i16(-1) + i32(0),
                1: i16(0) + i16(-1) + i32(0) + b"\x00" * 8,
                2: b"\x00" + i16(0) + b"\x00" + b"\x01" + b"\x00" * 8 + b"\x00"}[version]
    assert answer == expected
    assert string("t1") in conn.call(3, 0, i32(1) + string("t1")) and not conn.closed


def test_a_bad_sasl_authenticate_is_answered_58_then_closed(h):
    """A wrong password in SaslAuthenticate: error 58 with a message the client shows,
    then the close after the failure delay (nothing else is served meanwhile)."""
    conn = h.connect()
    answer = authenticate(conn, 1, plain("alice", "wrong"))
    assert answer[:2] == i16(58) and b"invalid credentials" in answer
    h.advance(1.0)
    assert conn.closed


def test_sasl_authenticate_before_a_handshake_closes(h):
    conn = h.connect()
    token = plain("alice", TOKEN)
    conn.send_raw(request(36, 1, 5, i32(len(token)) + token))
    assert conn.responses() == [] and conn.closed
