"""Security: AUTH before anything but PING, the failed-attempt delay on the reactor clock,
no secret in any log line, the refusal to listen on a non-loopback address without
authentication, and TLS on the V1 listener."""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from broker.auth import TokenStore, bind_refusal, failure_delay, hash_token, new_token
from tests.reliability.inmemory import InMemoryBroker
from tests.support import ROOT, BrokerProcess

TOKEN = "Zq8-secret-token-never-logged-4f1c2b"


def _tokens_file(tmp_path: Path, users: dict[str, str]) -> Path:
    path = tmp_path / "tokens"
    path.write_text("# skerry tokens\n" + "".join(f"{u}:{hash_token(t)}\n"
                                                 for u, t in users.items()))
    return path


def _broker(tmp_path: Path) -> InMemoryBroker:
    tokens = _tokens_file(tmp_path, {"alice": TOKEN})
    return InMemoryBroker(tmp_path / "data", auth={"tokens_file": str(tokens)},
                          topics={"t": {"partitions": 1}}, storage={"fsync": "never"})


class TokenStoreTests:
    def test_verify_accepts_only_the_right_user_and_token(self, tmp_path: Path) -> None:
        """A token checks out for its own user only; unknown users and wrong tokens fail."""
        store = TokenStore.from_file(str(_tokens_file(tmp_path, {"a": "tok1", "b": "tok2"})))
        assert store.verify("a", "tok1") and store.verify("b", "tok2")
        assert not store.verify("a", "tok2")
        assert not store.verify("nobody", "tok1")
        assert not store.verify("a", "")

    def test_malformed_line_is_refused_without_echoing_it(self, tmp_path: Path) -> None:
        """A tokens file with a pasted plain token names the line but never repeats it."""
        path = tmp_path / "tokens"
        path.write_text(f"alice {TOKEN}\n")
        with pytest.raises(ValueError) as info:
            TokenStore.from_file(str(path))
        assert ":1:" in str(info.value) and TOKEN not in str(info.value)

    def test_failure_delay_doubles_and_is_capped(self) -> None:
        """The answer to repeated failures on one connection waits 0.25 s, 0.5 s, ... 8 s."""
        assert [failure_delay(n) for n in (1, 2, 3, 6, 7, 50)] == [0.25, 0.5, 1.0, 8.0, 8.0, 8.0]

    def test_new_tokens_are_random_and_wire_safe(self) -> None:
        """Generated tokens differ and contain nothing the V1 line syntax reserves."""
        tokens = {new_token() for _ in range(50)}
        assert len(tokens) == 50
        assert all(len(t) >= 40 and not set(t) & set(" |,:\n") for t in tokens)

    def test_cli_add_writes_a_hash_and_prints_the_token_once(self, tmp_path: Path) -> None:
        """`python -m broker.auth add` appends user:sha256 and prints the token, which then
        verifies; the file never holds the token itself."""
        path = tmp_path / "tokens"
        out = subprocess.run([sys.executable, "-m", "broker.auth", "add", "bob", str(path)],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        assert out not in path.read_text()
        assert TokenStore.from_file(str(path)).verify("bob", out)

    def test_bind_refusal_only_for_non_loopback_without_auth(self) -> None:
        """Loopback needs nothing; any other address needs auth configured."""
        assert bind_refusal("127.0.0.1", False) is None
        assert bind_refusal("::1", False) is None
        assert bind_refusal("0.0.0.0", True) is None
        message = bind_refusal("0.0.0.0", False)
        assert message is not None and "auth.tokens_file" in message


class AuthProtocolTests:
    def test_everything_but_ping_and_auth_is_refused_before_auth(self, tmp_path: Path) -> None:
        """Before AUTH, PING works and PRODUCE (the fast path), CONSUME and JOIN answer
        UNAUTHENTICATED without storing anything."""
        h = _broker(tmp_path)
        proto, tr = h.connect()
        assert h.request(proto, tr, "V1|1|PING|") == [b"V1|1|OK"]
        for line in ("V1|2|PRODUCE|t k:v", "V1|3|PRODUCE|t k:v acks=all",
                     "V1|4|CONSUME|t 0 0", "V1|5|JOIN|g t c1"):
            (reply,) = h.request(proto, tr, line)
            assert reply.split(b"|")[2:4] == [b"ERR", b"UNAUTHENTICATED"], reply
        assert h.broker.core.hw("t", 0) == -1
        h.close()

    def test_auth_then_produce_and_consume(self, tmp_path: Path) -> None:
        """After a good AUTH the connection is served normally; another connection is
        still refused (the flag is per connection)."""
        h = _broker(tmp_path)
        proto, tr = h.connect()
        other, other_tr = h.connect()
        assert h.request(proto, tr, f"V1|1|AUTH|alice {TOKEN}") == [b"V1|1|OK"]
        assert h.request(proto, tr, "V1|2|PRODUCE|t k:hello")[0].startswith(b"V1|2|OK|")
        assert h.request(proto, tr, "V1|3|CONSUME|t 0 0")[0].startswith(
            b"V1|3|OK|messages=0:hello")
        assert b"UNAUTHENTICATED" in h.request(other, other_tr, "V1|9|CONSUME|t 0 0")[0]
        h.close()

    def test_failed_auth_is_answered_late_without_blocking_others(self, tmp_path: Path) -> None:
        """A wrong token is answered only after 0.25 s of reactor time; meanwhile another
        connection authenticates and produces at once."""
        h = _broker(tmp_path)
        bad, bad_tr = h.connect()
        good, good_tr = h.connect()
        assert h.request(bad, bad_tr, "V1|1|AUTH|alice wrong") == []
        assert h.request(good, good_tr, f"V1|1|AUTH|alice {TOKEN}") == [b"V1|1|OK"]
        assert h.request(good, good_tr, "V1|2|PRODUCE|t k:v")[0].startswith(b"V1|2|OK")
        h.clock.advance(0.24)
        assert bad_tr.value() == b""
        h.clock.advance(0.02)
        assert bad_tr.value() == b"V1|1|ERR|UNAUTHENTICATED|invalid user or token\n"
        h.close()

    def test_pipelined_guesses_are_checked_one_delay_apart(self, tmp_path: Path) -> None:
        """Ten pipelined wrong AUTHs take 0.25+0.5+1+2+4+8*5 s to answer; the right token
        sent after them is only checked once those delays are over."""
        h = _broker(tmp_path)
        proto, tr = h.connect()
        guesses = "".join(f"V1|{i}|AUTH|alice guess{i}\n" for i in range(10))
        proto.dataReceived(guesses.encode() + f"V1|10|AUTH|alice {TOKEN}\n".encode())
        total = sum(failure_delay(n) for n in range(1, 11))
        h.clock.pump([0.05] * round((total - 0.5) / 0.05))
        assert len(tr.value().splitlines()) == 9
        assert not proto.authenticated
        h.clock.pump([0.05] * 30)
        replies = tr.value().splitlines()
        assert len(replies) == 11 and replies[-1] == b"V1|10|OK"
        assert proto.authenticated
        h.close()

    def test_no_token_in_any_log_line(self, tmp_path: Path,
                                      caplog: pytest.LogCaptureFixture) -> None:
        """Debug logging of a failed and a successful AUTH (and a malformed one) shows the
        user name but never the token, and no reply echoes it."""
        caplog.set_level(logging.DEBUG)
        h = _broker(tmp_path)
        proto, tr = h.connect()
        wrong = "Wr0ng-" + TOKEN[::-1]
        replies = h.request(proto, tr, f"V1|1|AUTH|alice {wrong}")
        h.clock.advance(1)
        replies += tr.value().splitlines()
        replies += h.request(proto, tr, f"V1|2|AUTH|alice {TOKEN}")
        replies += h.request(proto, tr, f"V1|3|AUTH|alice {TOKEN} extra")
        replies += h.request(proto, tr, f"V1|4|AUTH|{TOKEN}")
        h.close()
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert "AUTH failed: user alice" in text and "AUTH ok: user alice" in text
        for secret in (TOKEN, wrong):
            assert secret not in text
            assert all(secret.encode() not in r for r in replies)
        assert repr(TOKEN) not in repr(h.broker.v1_factory.codec.parse_command(
            f"V1|5|AUTH|alice {TOKEN}".encode()))

    def test_auth_without_configuration_is_harmless(self, tmp_path: Path) -> None:
        """With no tokens file every command is served and AUTH simply answers OK."""
        h = InMemoryBroker(tmp_path / "data", topics={"t": {"partitions": 1}})
        proto, tr = h.connect()
        assert h.request(proto, tr, "V1|1|AUTH|anyone anything") == [b"V1|1|OK"]
        assert h.request(proto, tr, "V1|2|PRODUCE|t k:v")[0].startswith(b"V1|2|OK")
        h.close()


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


class ProcessSecurityTests:
    def test_non_loopback_without_auth_is_refused_with_exit_2(self, tmp_path: Path) -> None:
        """`skerry serve --host 0.0.0.0` without auth exits 2 with one clear line."""
        broker = BrokerProcess(tmp_path, {"host": "0.0.0.0"})
        with pytest.raises(RuntimeError) as info:
            broker.start(timeout=20)
        assert "broker exited with 2" in str(info.value)
        lines = [ln for ln in broker.log_text().splitlines() if "refusing to listen" in ln]
        assert len(lines) == 1 and "0.0.0.0" in lines[0] and "auth.tokens_file" in lines[0]

    def test_non_loopback_with_auth_and_tls(self, tmp_path: Path) -> None:
        """With a tokens file and a certificate the broker listens on 0.0.0.0 over TLS: a TLS
        client authenticates and produces; a plain-text client gets no V1 reply and is
        disconnected."""
        cert, key = _self_signed(tmp_path)
        tokens = _tokens_file(tmp_path, {"alice": TOKEN})
        with BrokerProcess(tmp_path, {"host": "0.0.0.0", "auth": {"tokens_file": str(tokens)},
                                      "tls": {"cert": str(cert), "key": str(key)}}) as broker:
            plain = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
            plain.sendall(b"V1|1|PING|\n")
            received = b""
            try:
                while chunk := plain.recv(4096):
                    received += chunk
            except (ConnectionResetError, TimeoutError):
                pass
            plain.close()
            assert b"V1|" not in received
            context = ssl.create_default_context(cafile=str(cert))
            raw = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"V1|1|PING|\nV1|2|PRODUCE|t k:v\n"
                            + f"V1|3|AUTH|alice {TOKEN}\nV1|4|PRODUCE|t k:v\n".encode())
                data = b""
                while data.count(b"\n") < 4:
                    data += tls.recv(4096)
            replies = data.splitlines()
            assert replies[0] == b"V1|1|OK"
            assert b"UNAUTHENTICATED" in replies[1]
            assert replies[2] == b"V1|3|OK" and replies[3].startswith(b"V1|4|OK|")
            assert broker.stop() == 0
        assert TOKEN not in broker.log_text()
