"""``broker.services.etcd`` against a real etcd that speaks TLS only and wants client
certificates (``--client-cert-auth``), with certificates made in the test
(``tests.certs``): calls and watches over TLS, refusals of a client without a certificate
or trusting another CA, and a broker user whose role is limited to its cluster's prefix,
set up with the etcdctl commands of docs/replication.md (replayed here)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor as _reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from broker.cli.devcluster import etcd_is_healthy, free_ports
from broker.services.etcd import EtcdClient, EtcdError, EtcdUnavailable, TreqTransport, WatchEvent
from tests.certs import CertificateAuthority
from tests.control.real_etcd import etcd_binary
from tests.support import ROOT, debian_tool

reactor = _reactor
PREFIX = "/skerry/prod-1/"
BROKER_PASSWORD = "broker-pw-5cQ1"


def sleep(seconds: float) -> Deferred[None]:
    return deferLater(reactor, seconds, lambda: None)


class TLSEtcd:
    """One etcd member on 127.0.0.1 speaking TLS only and requiring a client certificate
    signed by ``ca``."""

    def __init__(self, tmp: Path, *, token_ttl: int = 300) -> None:
        binary = etcd_binary()
        self.tmp = tmp
        self.ca = CertificateAuthority(tmp / "pki", "etcd-ca")
        self.server_cert, self.server_key = self.ca.issue("etcd-server")
        # etcd's JSON gateway refuses a client certificate with a CN once auth is on.
        self.cert, self.key = self.ca.issue("skerry-broker", common_name=False)
        self.admin_cert, self.admin_key = self.ca.issue("etcd-admin")
        client, peer = free_ports(2)
        self.endpoint = f"https://127.0.0.1:{client}"
        log = open(tmp / "etcd.log", "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [binary, "--name", "m0", "--data-dir", str(tmp / "m0"),
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--cert-file", str(self.server_cert), "--key-file", str(self.server_key),
             "--client-cert-auth", "--trusted-ca-file", str(self.ca.cert_path),
             "--auth-token-ttl", str(token_ttl),
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
             "--logger", "zap", "--log-level", "error"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        import ssl

        context = ssl.create_default_context(cafile=str(self.ca.cert_path))
        context.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        deadline = time.monotonic() + 15
        while not etcd_is_healthy(self.endpoint, context):
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("TLS etcd not healthy after 15 s")
            time.sleep(0.05)

    def etcdctl_env(self) -> dict[str, str]:
        return {**os.environ, "ETCDCTL_API": "3", "ETCDCTL_ENDPOINTS": self.endpoint,
                "ETCDCTL_CACERT": str(self.ca.cert_path), "ETCDCTL_CERT": str(self.admin_cert),
                "ETCDCTL_KEY": str(self.admin_key)}

    def transport(self, **kw: str) -> TreqTransport:
        return TreqTransport(reactor, **{"ca": str(self.ca.cert_path), "cert": str(self.cert),
                                         "key": str(self.key), **kw})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[TLSEtcd]:
    member = TLSEtcd(tmp_path)
    yield member
    member.stop()


@pytest_twisted.ensureDeferred
async def test_calls_and_watch_over_tls_with_a_client_certificate(etcd: TLSEtcd) -> None:
    """With the CA and a client certificate: a lease, a put, a range and a watch event,
    all over https."""
    transport = etcd.transport()
    client = EtcdClient([etcd.endpoint], reactor, transport)
    seen: list[WatchEvent] = []
    try:
        lease, ttl = await client.grant(5)
        assert lease and ttl >= 2
        watch = client.watch("/skerry/t/", seen.extend, prefix=True)
        await sleep(0.3)
        await client.put("/skerry/t/a", b"1", lease)
        assert [kv.value for kv in (await client.range("/skerry/t/a")).kvs] == [b"1"]
        for _ in range(50):
            if seen:
                break
            await sleep(0.05)
        assert [(e.kv.key, e.kv.value) for e in seen] == [("/skerry/t/a", b"1")]
        watch.cancel()
    finally:
        await transport.close()


@pytest_twisted.ensureDeferred
async def test_no_client_certificate_or_another_ca_is_refused(etcd: TLSEtcd,
                                                              tmp_path: Path) -> None:
    """Without a client certificate etcd refuses the handshake; trusting another CA, the
    broker refuses etcd's certificate. Neither write lands."""
    other = CertificateAuthority(tmp_path / "other", "other-ca")
    other_cert, other_key = other.issue("intruder", common_name=False)
    for kw, why in (({"cert": None, "key": None}, "bad certificate"),
                    ({"ca": str(other.cert_path)}, "certificate verify failed"),
                    ({"cert": str(other_cert), "key": str(other_key)}, "bad certificate")):
        transport = etcd.transport(**kw)  # type: ignore[arg-type]
        client = EtcdClient([etcd.endpoint], reactor, transport, rounds=1)
        try:
            # A refused handshake sent nothing: even a write is "unavailable", not unknown.
            with pytest.raises(EtcdUnavailable, match=why):
                await client.put("/skerry/x", b"1")
        finally:
            await transport.close()
    good_transport = etcd.transport()
    try:
        assert not (await EtcdClient([etcd.endpoint], reactor, good_transport)
                    .range("/skerry/x")).kvs
    finally:
        await good_transport.close()


def doc_commands() -> list[str]:
    """The etcdctl lines of docs/replication.md's etcd role block, in order."""
    text = (ROOT / "docs" / "replication.md").read_text()
    section = text.split("#### etcd: TLS and a role limited to the cluster's prefix", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "no sh block in the etcd section"
    lines = [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines()]
    return [ln for ln in lines if ln.startswith("etcdctl ")]


def replay(member: TLSEtcd, passwords: dict[str, str]) -> None:
    """Run the documented commands; ``user add`` reads its password from stdin here."""
    etcdctl = debian_tool("etcdctl", "etcd-client")
    for line in doc_commands():
        args = line.split()[1:]
        stdin = None
        if args[:2] == ["user", "add"]:
            args.append("--interactive=false")
            stdin = passwords[args[2]] + "\n"
        proc = subprocess.run([etcdctl, *args], env=member.etcdctl_env(), input=stdin,
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[TLSEtcd]:
    member = TLSEtcd(tmp_path, token_ttl=2)
    try:
        replay(member, {"root": "root-pw-8Hd2", "skerry-prod-1": BROKER_PASSWORD})
        yield member
    finally:
        member.stop()


@pytest_twisted.ensureDeferred
async def test_role_limited_to_the_cluster_prefix(locked: TLSEtcd) -> None:
    """After the documented etcdctl commands, the broker user reads, writes, watches and
    holds leases under /skerry/prod-1/ and is refused anywhere else; a wrong password is
    refused; an expired token (etcd --auth-token-ttl 2) is replaced without the caller
    noticing."""
    transport = locked.transport(user="skerry-prod-1", password=BROKER_PASSWORD)
    client = EtcdClient([locked.endpoint], reactor, transport)
    seen: list[WatchEvent] = []
    try:
        lease, _ = await client.grant(10)
        await client.put(PREFIX + "brokers/0", b"{}", lease)
        assert (await client.range(PREFIX, prefix=True)).kvs
        with pytest.raises(EtcdError, match="permission denied"):
            await client.put("/skerry/prod-2/brokers/0", b"{}")
        with pytest.raises(EtcdError, match="permission denied"):
            await client.range("/", prefix=True)
        watch = client.watch(PREFIX, seen.extend, prefix=True)
        await sleep(3.5)            # the token expires while idle
        await client.put(PREFIX + "topics/t", b"{}")
        for _ in range(50):
            if seen:
                break
            await sleep(0.05)
        assert [e.kv.key for e in seen] == [PREFIX + "topics/t"]
        assert transport.logins == 2    # the put after the pause logged in again
        watch.cancel()
    finally:
        await transport.close()
    wrong = locked.transport(user="skerry-prod-1", password="nope")
    try:
        with pytest.raises(EtcdError, match="authentication failed"):  # at once: not retried
            await EtcdClient([locked.endpoint], reactor, wrong).range(PREFIX, prefix=True)
    finally:
        await wrong.close()
