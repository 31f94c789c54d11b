"""Security: AUTH before anything but PING, the failed-attempt delay on the reactor clock,
no secret in any log line, the refusal to listen on a non-loopback address without
authentication, TLS on every listener (V1, Iggy, metrics, and the metrics port's startup
responder) with a plain-text client refused on each, credentials on /metrics, and the
keys a cluster member with TLS or AUTH needs (the links themselves:
tests/replication/test_peer_security.py and test_secure_cluster.py)."""

from __future__ import annotations

import base64
import http.client
import logging
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactor
from twisted.web.server import NOT_DONE_YET
from twisted.web.test.requesthelper import DummyRequest

from broker.auth import TokenStore, bind_refusal, failure_delay, hash_token, new_token
from broker.config import config_from_mapping
from broker.metrics import (
    BrokerMetrics,
    HttpAuth,
    MetricsService,
    StartupResponder,
    startup_tls_context,
)
from broker.version import skerry_version
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
    return InMemoryBroker(tmp_path / "data", auth={"tokens_file": str(tokens), "super_users": "alice"},
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

    def test_skerry_auth_adds_lists_and_removes_users(self, tmp_path: Path) -> None:
        """`skerry auth add` prints only the token on stdout (so it can go straight into a
        file) into a 0600 file that keeps its hash; `list` shows the users; `remove` takes
        one out (its token stops verifying, comments and the others stay); mistakes exit 2
        with one line: a user added twice, an unknown user, the last user."""
        path = tmp_path / "tokens"

        def skerry(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "broker", "auth", *args],
                                  cwd=ROOT, capture_output=True, text=True, timeout=60)

        bob = skerry("add", "bob", str(path))
        assert bob.returncode == 0 and bob.stdout.count("\n") == 1, bob
        token = bob.stdout.strip()
        assert "shown only once" in bob.stderr and token not in path.read_text()
        assert path.stat().st_mode & 0o777 == 0o600
        assert skerry("add", "alice", str(path)).returncode == 0
        with path.open("a") as handle:
            handle.write("# a comment\n")
        assert skerry("list", str(path)).stdout == "alice\nbob\n"
        again = skerry("add", "bob", str(path))
        assert (again.returncode, again.stderr) == (
            2, f"skerry auth add: {path}: user bob exists already (skerry auth remove bob "
               f"{path} first to give it a new token)\n")
        assert TokenStore.from_file(str(path)).verify("bob", token)
        removed = skerry("remove", "bob", str(path))
        assert removed.returncode == 0, removed
        assert skerry("list", str(path)).stdout == "alice\n"
        assert "# a comment" in path.read_text()
        assert not TokenStore.from_file(str(path)).verify("bob", token)
        assert path.stat().st_mode & 0o777 == 0o600
        assert skerry("remove", "carol", str(path)).stderr == (
            f"skerry auth remove: {path}: no user carol (skerry auth list {path} shows "
            "them)\n")
        last = skerry("remove", "alice", str(path))
        assert last.returncode == 2 and "only user" in last.stderr
        assert skerry("add", "bad name", str(path)).returncode == 2

    def test_the_docs_use_skerry_auth(self) -> None:
        """README and docs/ show `skerry auth add`, which works wherever `skerry` does,
        not `python -m broker.auth`, which needs the project's interpreter."""
        for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
            assert "python -m broker.auth" not in page.read_text(), page.name

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
        with BrokerProcess(tmp_path, {"host": "0.0.0.0", "auth": {"tokens_file": str(tokens),
                                                                      "super_users": "alice"},
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


def _basic(user: str, token: str) -> bytes:
    return b"Basic " + base64.b64encode(f"{user}:{token}".encode())


class MetricsAuthTests:
    def _auth(self, tmp_path: Path) -> tuple[HttpAuth, Clock]:
        clock = Clock()
        tokens = TokenStore.from_file(str(_tokens_file(tmp_path, {"alice": TOKEN,
                                                                  "bob": "bobs-token"})))
        return HttpAuth(tokens, clock), clock

    def test_basic_and_bearer_credentials(self, tmp_path: Path) -> None:
        """/metrics accepts HTTP Basic with a V1 user and that user's token, and Bearer with
        any user's token; a wrong token, another user's token, a missing colon, bad
        base64, an unknown scheme or no header at all are refused."""
        auth, _ = self._auth(tmp_path)
        assert auth.user_for(_basic("alice", TOKEN)) == "alice"
        assert auth.user_for(b"basic " + base64.b64encode(b"bob:bobs-token")) == "bob"
        assert auth.user_for(b"Bearer " + TOKEN.encode()) == "alice"
        assert auth.user_for(b"Bearer bobs-token") == "bob"
        for header in (_basic("alice", "wrong"), _basic("bob", TOKEN), _basic("carol", TOKEN),
                       b"Basic " + base64.b64encode(TOKEN.encode()), b"Basic !!notbase64",
                       b"Bearer wrong", b"Bearer", b"Digest " + TOKEN.encode(), b"", None):
            assert auth.user_for(header) is None, header

    def test_refusal_is_a_delayed_401_and_health_stays_open(self, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture
                                                            ) -> None:
        """Without credentials /metrics answers 401 with a Basic challenge, only after
        0.25 s of reactor time; with them it answers the exposition at once; /health
        answers without credentials; the log names the refusal but never a token."""
        caplog.set_level(logging.DEBUG)
        auth, clock = self._auth(tmp_path)
        service = MetricsService(BrokerMetrics(clock), auth)
        service.health.state = "ready"
        request = DummyRequest([b"metrics"])
        request.requestHeaders.setRawHeaders(b"authorization", [_basic("alice", "Wr0ng")])
        resource = service.site.getResourceFor(request)
        assert resource.render(request) is NOT_DONE_YET
        clock.advance(0.24)
        assert request.finished == 0
        clock.advance(0.02)
        assert request.finished == 1 and request.responseCode == 401
        assert b"".join(request.written) == b"authentication required\n"
        assert request.responseHeaders.getRawHeaders(b"www-authenticate") == [HttpAuth.REALM]
        good = DummyRequest([b"metrics"])
        good.requestHeaders.setRawHeaders(b"authorization", [_basic("alice", TOKEN)])
        body = service.site.getResourceFor(good).render(good)
        assert b"skerry_ready 1.0" in body
        health = DummyRequest([b"health"])
        assert service.site.getResourceFor(health).render(health) == b"ready\nskerry %s\n" % skerry_version().encode()
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert "refused a request for /metrics" in text and TOKEN not in text

    def test_refusal_of_a_client_that_went_away_is_dropped(self, tmp_path: Path) -> None:
        """A refused client that disconnects before its delayed 401 leaves no timer."""
        auth, clock = self._auth(tmp_path)
        service = MetricsService(BrokerMetrics(clock), auth)
        request = DummyRequest([b"metrics"])
        assert service.site.getResourceFor(request).render(request) is NOT_DONE_YET
        request.processingFailed(ConnectionError("gone"))
        assert clock.getDelayedCalls() == []

    def test_metrics_listener_refuses_a_non_loopback_host_without_auth(self,
                                                                       tmp_path: Path) -> None:
        """Like the V1 listener, the metrics endpoint does not listen on 0.0.0.0 without
        authentication; with it, it does; on loopback it needs none."""
        clock = Clock()
        with pytest.raises(RuntimeError, match="refusing to listen on 0.0.0.0"):
            MetricsService(BrokerMetrics(clock)).listen(MemoryReactor(), "0.0.0.0", 0)
        MetricsService(BrokerMetrics(clock)).listen(MemoryReactor(), "127.0.0.1", 0)
        auth, _ = self._auth(tmp_path)
        MetricsService(BrokerMetrics(clock), auth).listen(MemoryReactor(), "0.0.0.0", 0)


class ClusterSecurityTests:
    BROKERS = {0: "127.0.0.1:9092", 1: "127.0.0.1:9093"}

    def test_cluster_member_with_tls_or_auth_needs_the_peer_keys(self, tmp_path: Path) -> None:
        """Replication speaks TLS and AUTH now (docs/replication.md, Security between
        brokers): a cluster member with TLS needs cluster.tls.ca, one with authentication
        cluster.peer_users and its own peer user; with them it is accepted. A single broker
        with both, or a plain cluster, needs none of them."""
        tokens = str(_tokens_file(tmp_path, {"alice": TOKEN}))
        cluster = {"broker_id": 0, "brokers": self.BROKERS}
        tls = {"tls": {"cert": "c.pem", "key": "k.pem"}}
        auth = {"auth": {"tokens_file": tokens, "super_users": "alice"}}
        for extra, named in ((tls, "cluster.tls.ca"), (auth, "cluster.peer_users")):
            with pytest.raises(ValueError) as info:
                config_from_mapping({"cluster": cluster, **extra})
            assert named in str(info.value) and TOKEN not in str(info.value)
        secured = {**cluster, "tls": {"ca": "ca.pem"}, "peer_users": ["b0", "b1"],
                   "peer_user": "b0", "peer_token_file": "peer.token"}
        assert config_from_mapping({"cluster": secured, **tls, **auth}).cluster is not None
        assert config_from_mapping({"cluster": cluster}).cluster is not None
        assert config_from_mapping({**tls, **auth}).cluster is None

    def test_skerry_serve_exits_2(self, tmp_path: Path) -> None:
        """`skerry serve` with a cluster section and TLS but no cluster CA exits 2 with one
        clear line."""
        cert, key = _self_signed(tmp_path)
        broker = BrokerProcess(tmp_path, {"cluster": {"broker_id": 0, "brokers": self.BROKERS},
                                          "tls": {"cert": str(cert), "key": str(key)}})
        with pytest.raises(RuntimeError, match="broker exited with 2"):
            broker.start(timeout=20)
        assert "cluster.tls.ca: required with tls.cert" in broker.log_text()


def _plain_answer(port: int, data: bytes) -> bytes:
    """What a plain-text client gets back for ``data`` before the connection ends."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    received = b""
    try:
        sock.sendall(data)
        while chunk := sock.recv(4096):
            received += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    finally:
        sock.close()
    return received


def _is_refusal(received: bytes) -> bool:
    """Nothing, or only a TLS record (an alert: content type 21; a handshake: 22)."""
    return received == b"" or received[:1] in (b"\x15", b"\x16")


def _https(port: int, cert: Path, path: str, authorization: bytes | None = None
           ) -> tuple[int, bytes, str | None]:
    context = ssl.create_default_context(cafile=str(cert))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    headers = {} if authorization is None else {"Authorization": authorization.decode()}
    conn.request("GET", path, headers=headers)
    answer = conn.getresponse()
    result = answer.status, answer.read(), answer.getheader("www-authenticate")
    conn.close()
    return result


class TlsEveryListenerTests:
    def test_v1_iggy_and_metrics_refuse_plain_clients(self, tmp_path: Path) -> None:
        """With tls.cert/tls.key, auth and every listener on: a plain-text V1 PING, a plain
        Iggy PING frame and a plain HTTP GET each get no answer of their protocol (nothing,
        or a TLS alert); over TLS, /health answers without credentials, /metrics answers
        401 without them or with a wrong token and 200 with HTTP Basic or Bearer, and V1
        is served. No token reaches the log."""
        cert, key = _self_signed(tmp_path)
        tokens = _tokens_file(tmp_path, {"alice": TOKEN})
        config = {"auth": {"tokens_file": str(tokens), "super_users": "alice"}, "iggy_port": 0, "metrics_port": 0,
                  "tls": {"cert": str(cert), "key": str(key)}}
        with BrokerProcess(tmp_path, config) as broker:
            line = re.findall(r"skerry listening on (.*?);", broker.log_text())[-1]
            ports = dict((name, int(port)) for name, port in
                         re.findall(r"(\w+)=[0-9.]+:(\d+)", line))
            iggy_ping = struct.pack("<II", 4, 1)  # length 4, command 1 (PING)
            for name, data in (("v1", b"V1|1|PING|\n"), ("iggy", iggy_ping),
                               ("metrics", b"GET /health HTTP/1.0\r\n\r\n")):
                received = _plain_answer(ports[name], data)
                assert _is_refusal(received), (name, received[:40])
            assert _https(ports["metrics"], cert, "/health")[:2] == (200, b"ready\nskerry %s\n" % skerry_version().encode())
            status, _, challenge = _https(ports["metrics"], cert, "/metrics")
            assert status == 401 and challenge is not None and "Basic" in challenge
            assert _https(ports["metrics"], cert, "/metrics", _basic("alice", "nope"))[0] == 401
            status, body, _ = _https(ports["metrics"], cert, "/metrics", _basic("alice", TOKEN))
            assert status == 200 and b"skerry_ready 1.0" in body
            status, body, _ = _https(ports["metrics"], cert, "/metrics",
                                     b"Bearer " + TOKEN.encode())
            assert status == 200 and b"skerry_connections" in body
            context = ssl.create_default_context(cafile=str(cert))
            raw = socket.create_connection(("127.0.0.1", ports["v1"]), timeout=10)
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(f"V1|1|AUTH|alice {TOKEN}\nV1|2|PING|\n".encode())
                data = b""
                while data.count(b"\n") < 2:
                    data += tls.recv(4096)
            assert data.splitlines() == [b"V1|1|OK", b"V1|2|OK"]
            assert broker.stop() == 0
        assert TOKEN not in broker.log_text()

    def test_startup_responder_answers_on_a_descriptor_above_1024(self) -> None:
        """A broker with many segment files open has descriptors above select()'s 1024:
        the startup responder still answers 503 starting there (it polled with select(),
        which raised, and the responder went silent)."""
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if min(soft, hard) < 1200:
            pytest.skip(f"the open-file limit ({soft}) is below 1,200")
        filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        try:
            responder = StartupResponder("127.0.0.1", 0, None)
            try:
                assert responder._sock.fileno() > 1024
                answer = _plain_answer(responder.address[1], b"GET /health HTTP/1.0\r\n\r\n")
                assert answer.startswith(b"HTTP/1.1 503"), answer
            finally:
                responder.close()
        finally:
            for fd in filler:
                os.close(fd)

    def test_startup_responder_speaks_tls_only(self, tmp_path: Path) -> None:
        """While the store recovers, the metrics port's startup responder answers 503
        starting over TLS, and gives a plain-text client no HTTP answer."""
        cert, key = _self_signed(tmp_path)
        responder = StartupResponder("127.0.0.1", 0, startup_tls_context(str(cert), str(key)))
        try:
            port = responder.address[1]
            assert _is_refusal(_plain_answer(port, b"GET /health HTTP/1.0\r\n\r\n"))
            assert _https(port, cert, "/health")[:2] == (503, b"starting\nskerry %s\n" % skerry_version().encode())
        finally:
            responder.close()
