"""Security between brokers, in memory (``cluster_harness``: real brokers, iosim links,
simulated time): the ``cluster`` security keys, the peer token file, replication that
logs in as a peer user, and the broker-only commands refused to client principals without
moving the ISR or ``hw``. The same over real TLS between processes is
``test_secure_cluster.py``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.auth import AuthFileError, TokenStore, hash_token, read_peer_token
from broker.config import ConfigError, config_from_mapping
from broker.v1.handlers.dispatch import BROKER_ONLY_COMMANDS
from tests.replication.cluster_harness import TOPIC, Network
from tests.support import ROOT

PEERS = {"broker-0": "tok-b0-Jx81", "broker-1": "tok-b1-Qw27", "broker-2": "tok-b2-Lm55"}
CLIENT = ("alice", "tok-alice-Vz90")
BROKERS = {0: "10.0.0.1:9092", 1: "10.0.0.2:9092", 2: "10.0.0.3:9092"}


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens"
    users = {**PEERS, CLIENT[0]: CLIENT[1]}
    path.write_text("".join(f"{u}:{hash_token(t)}\n" for u, t in users.items()))
    return path


def token_file(folder: Path, name: str, token: str, mode: int = 0o600) -> Path:
    path = folder / f"{name}.token"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def secure_config(tmp_path: Path, broker_id: int, *, user: str | None = None,
                  token: str | None = None) -> dict[str, Any]:
    """The security keys of broker ``broker_id`` (its own peer user and token unless
    ``user``/``token`` say otherwise)."""
    user = user or f"broker-{broker_id}"
    token = token if token is not None else PEERS.get(user, CLIENT[1])
    return {
        # No ACLs here: every user may touch every resource (docs/security.md, upgrade
        # path); the broker-only commands stay limited to the peer users.
        "auth": {"tokens_file": str(tokens_file(tmp_path)),
                 "allow_everyone_if_no_acl_found": True},
        "peer_users": sorted(PEERS),
        "peer_user": user,
        "peer_token_file": str(token_file(tmp_path, f"b{broker_id}", token)),
    }


def secure_network(tmp_path: Path, overrides: dict[int, dict[str, Any]] | None = None
                   ) -> Network:
    tmp_path.mkdir(parents=True, exist_ok=True)
    net = Network(tmp_path, start=False)
    for i, node in net.nodes.items():
        extra = secure_config(tmp_path, i, **(overrides or {}).get(i, {}))
        node.config["auth"] = extra.pop("auth")
        node.config["cluster"].update(extra)
    for i in net.nodes:
        net.start(i)
    net.run_until(lambda: net.confirmed_leader(0), within=5)
    return net


def field(line: str, key: str) -> str:
    match = re.search(rf"(?:\|| ){key}=(\[[^\]]*\]|\S*)", line)
    assert match, line
    return match.group(1)


# ---------------------------------------------------------------------------- configuration


class ConfigTests:
    BASE: dict[str, Any] = {"broker_id": 0, "brokers": BROKERS}

    def test_security_keys_parse(self, tmp_path: Path) -> None:
        """tls.ca, peer_users, peer_user and peer_token_file land in ClusterConfig.security."""
        raw = {"tls": {"cert": "c.pem", "key": "k.pem"},
               "auth": {"tokens_file": "tokens"},
               "cluster": {**self.BASE, "tls": {"ca": "ca.pem"},
                           "peer_users": ["broker-0", "broker-1"], "peer_user": "broker-0",
                           "peer_token_file": "peer.token"}}
        security = config_from_mapping(raw).cluster.security
        assert security.tls_ca == "ca.pem"
        assert security.peer_users == {"broker-0", "broker-1"}
        assert (security.peer_user, security.peer_token_file) == ("broker-0", "peer.token")

    @pytest.mark.parametrize(("extra", "cluster", "named"), [
        ({"tls": {"cert": "c", "key": "k"}}, {}, "cluster.tls.ca: required with tls.cert"),
        ({}, {"tls": {"ca": "ca.pem"}}, "cluster.tls.ca: set without tls.cert"),
        ({}, {"tls": {"ca": "ca.pem", "crl": "x"}}, "cluster.tls.crl: unknown key"),
        ({"auth": {"tokens_file": "t"}}, {"peer_user": "b", "peer_token_file": "f"},
         "cluster.peer_users: required with auth.tokens_file"),
        ({"auth": {"tokens_file": "t"}}, {"peer_users": ["b"]},
         "cluster.peer_user: required with auth.tokens_file"),
        ({}, {"peer_users": ["a"], "peer_user": "b", "peer_token_file": "f"},
         "cluster.peer_user: b is not one of cluster.peer_users"),
        ({}, {"peer_user": "b"}, "set both cluster.peer_user and cluster.peer_token_file"),
        ({}, {"peer_users": []}, "cluster.peer_users: expected a non-empty list"),
        ({}, {"peer_users": ["a b"]}, "cluster.peer_users: 'a b' is not a user name"),
    ])
    def test_mistakes_name_the_key(self, extra: dict[str, Any], cluster: dict[str, Any],
                                   named: str) -> None:
        with pytest.raises(ConfigError, match=re.escape(named)):
            config_from_mapping({**extra, "cluster": {**self.BASE, **cluster}})

    def test_etcd_login_keys(self) -> None:
        """cluster.etcd.user and password_file go together (docs: the etcd role)."""
        etcd = {"endpoints": ["https://127.0.0.1:2379"], "ca": "ca.pem", "cert": "c.pem",
                "key": "k.pem"}
        config = config_from_mapping({"cluster": {**self.BASE, "etcd": {
            **etcd, "user": "skerry-prod-1", "password_file": "etcd.pw"}}})
        assert config.cluster is not None and config.cluster.etcd is not None
        assert (config.cluster.etcd.user, config.cluster.etcd.password_file) == \
            ("skerry-prod-1", "etcd.pw")
        with pytest.raises(ConfigError, match="user and password_file go together"):
            config_from_mapping({"cluster": {**self.BASE, "etcd": {**etcd, "user": "u"}}})

    def test_single_broker_needs_none_of_it(self) -> None:
        """TLS and auth without a cluster section ask for no cluster keys (as before)."""
        config = config_from_mapping({"tls": {"cert": "c", "key": "k"},
                                      "auth": {"tokens_file": "t"}})
        assert config.cluster is None


class PeerTokenFileTests:
    def test_owner_only_file_is_read(self, tmp_path: Path) -> None:
        for mode in (0o600, 0o400):
            path = token_file(tmp_path, f"m{mode:o}", "s3cret-TOKEN", mode)
            assert read_peer_token(str(path)) == "s3cret-TOKEN"

    @pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
    def test_readable_by_others_is_refused_in_one_line(self, tmp_path: Path,
                                                        mode: int) -> None:
        path = token_file(tmp_path, "t", "s3cret-TOKEN", mode)
        with pytest.raises(AuthFileError) as info:
            read_peer_token(str(path))
        message = str(info.value)
        assert f"mode {mode:04o}" in message and "chmod 600" in message
        assert "s3cret" not in message and "\n" not in message

    @pytest.mark.parametrize("content", ["", "\n", "two words\n", "a|b\n"])
    def test_no_usable_token_is_refused(self, tmp_path: Path, content: str) -> None:
        path = tmp_path / "t"
        path.write_text(content)
        path.chmod(0o600)
        with pytest.raises(AuthFileError, match="expected the token on the first line"):
            read_peer_token(str(path))

    def test_skerry_serve_refuses_a_world_readable_token_with_exit_2(self,
                                                                      tmp_path: Path) -> None:
        """The broker does not start; stderr has one line naming the file and its mode."""
        config = {"data_dir": str(tmp_path / "data"), "port": 0,
                  "auth": {"tokens_file": str(tokens_file(tmp_path))},
                  "cluster": {"broker_id": 0, "brokers": {0: "127.0.0.1:1", 1: "127.0.0.1:2"},
                              **{k: v for k, v in secure_config(tmp_path, 0).items()
                                 if k != "auth"}}}
        Path(config["cluster"]["peer_token_file"]).chmod(0o644)
        path = tmp_path / "skerry.yaml"
        path.write_text(yaml.safe_dump(config))
        proc = subprocess.run([sys.executable, "-m", "broker", "serve", "--config", str(path)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if "peer_token_file" in ln]
        assert len(lines) == 1 and "mode 0644" in lines[0], proc.stderr
        assert PEERS["broker-0"] not in proc.stderr


# ---------------------------------------------------------------------------- the links


def test_brokers_log_in_and_replicate(tmp_path: Path) -> None:
    """With auth on, every broker logs in as its peer user: produce acks=all succeeds on the
    leader, both followers hold the records and hw, and the ISR is all three."""
    net = secure_network(tmp_path)
    client = net.client(0)
    assert client.request(f"AUTH|{CLIENT[0]} {CLIENT[1]}").endswith("|OK")
    for i in range(20):
        assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:v{i} acks=all"), i
    net.run_until(lambda: all(net.status(b).hw == 19 for b in (1, 2)), within=5)
    assert net.status(0).isr == [0, 1, 2]
    assert net.log_bytes(1) == net.log_bytes(0) == net.log_bytes(2)


def test_client_principal_cannot_move_isr_or_hw(tmp_path: Path) -> None:
    """A client user's REPLICA_FETCH, REPLICA_PULL, REPLICA_EPOCH and SET_PARTITION_ROLE are
    refused UNAUTHENTICATED; the leader's ISR, hw and role are unchanged. The same commands
    from a peer user are served."""
    net = secure_network(tmp_path)
    client = net.client(0)
    client.request(f"AUTH|{CLIENT[0]} {CLIENT[1]}")
    for i in range(5):
        assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:v{i} acks=all")
    net.crash(2)    # the ISR will shrink to [0 1]; a fake fetch must not bring 2 back
    net.run_until(lambda: net.status(0).isr == [0, 1], within=5)
    client.request(f"PRODUCE|{TOPIC} k:late acks=1")
    net.advance(0.5)
    before = net.status(0)
    assert before.hw == 5 and before.isr == [0, 1]
    for command in (f"REPLICA_FETCH|{TOPIC} 0 2 6", f"REPLICA_PULL|{TOPIC} 0 2 6 0",
                    f"REPLICA_EPOCH|{TOPIC} 0 2 7", f"REPLICA_STATUS|{TOPIC} 0",
                    f"SET_PARTITION_ROLE|{TOPIC} 0 follower",
                    "ADMIN_CREATE_TOPIC|other 1 1"):
        reply = client.request(command)
        assert "|ERR|UNAUTHENTICATED|" in reply and "broker principal" in reply, reply
    net.advance(0.5)
    after = net.status(0)
    assert (after.hw, after.isr, after.role, after.epoch) == \
        (before.hw, before.isr, before.role, before.epoch)
    admin = net.client(0)
    admin.request(f"AUTH|broker-1 {PEERS['broker-1']}")
    assert "|OK|role=leader" in admin.request(f"REPLICA_STATUS|{TOPIC} 0")


def test_unauthenticated_and_auth_off(tmp_path: Path) -> None:
    """Without AUTH the broker-only commands get the usual 'send AUTH first'; on a cluster
    without auth nothing changes (no principal needed)."""
    net = secure_network(tmp_path / "secure")
    reply = net.client(0).request(f"REPLICA_FETCH|{TOPIC} 0 1 0")
    assert "|ERR|UNAUTHENTICATED|send AUTH" in reply
    plain = Network(tmp_path / "plain")
    assert "|OK|replica=1" in plain.client(0).request(f"REPLICA_FETCH|{TOPIC} 0 1 0")


@pytest.mark.parametrize("override", [
    {"token": "not-the-token"},                 # wrong token: AUTH refused
    {"user": "alice"},                          # a client's valid token: not a peer user
], ids=["wrong-token", "client-user"])
def test_broker_without_the_peer_token_cannot_join(tmp_path: Path,
                                                   override: dict[str, Any]) -> None:
    """Broker 2 logs in with a wrong token, or as a client user: its epoch queries and pulls
    are refused, it never enters the ISR and copies nothing; brokers 0 and 1 carry on."""
    net = Network(tmp_path, start=False)
    for i, node in net.nodes.items():
        extra = secure_config(tmp_path, i, **(override if i == 2 else {}))
        node.config["auth"] = extra.pop("auth")
        if i == 2 and "user" in override:  # its own list must name its user; the others'
            extra["peer_users"] = sorted({*PEERS, override["user"]})
        node.config["cluster"].update(extra)
        net.start(i)
    net.run_until(lambda: net.confirmed_leader(0), within=5)
    client = net.client(0)
    client.request(f"AUTH|{CLIENT[0]} {CLIENT[1]}")
    for i in range(10):
        assert "|OK|" in client.request(f"PRODUCE|{TOPIC} k:v{i} acks=all")
    net.advance(3.0)   # longer than the lag timeout and many fetch retries
    assert net.status(0).isr == [0, 1] and net.status(0).hw == 9
    assert net.status(1).hw == 9
    assert net.plog(2).next_offset == 0
    if "token" in override:  # a refused AUTH holds further attempts off for 5 s
        assert len([c for c in net.connects if c[0] == 2]) <= 4, net.connects


def test_every_broker_only_command_is_gated() -> None:
    """The set holds the replication commands, SET_PARTITION_ROLE and the five admin
    commands of the control-plane contract."""
    assert BROKER_ONLY_COMMANDS >= {
        "REPLICA_FETCH", "REPLICA_PULL", "REPLICA_EPOCH", "SET_PARTITION_ROLE",
        "ADMIN_CREATE_TOPIC", "ADMIN_REGISTER_BROKER", "ADMIN_BROKER_HEARTBEAT",
        "ADMIN_SET_PARTITION_LEADER", "ADMIN_GET_METADATA"}


# ---------------------------------------------------------------------------- the docs


def _security_section() -> str:
    text = (ROOT / "docs" / "replication.md").read_text()
    return text.split("### Security between brokers", 1)[1].split("#### etcd:", 1)[0]


class DocsTests:
    def test_config_example_parses(self, tmp_path: Path) -> None:
        """The YAML example of docs/replication.md, Security between brokers, is a valid
        configuration with the security keys it describes."""
        block = re.search(r"```yaml\n(.*?)```", _security_section(), re.S)
        assert block
        config = config_from_mapping(yaml.safe_load(block.group(1)))
        assert config.cluster is not None
        security = config.cluster.security
        assert security.tls_ca == "/etc/skerry/cluster-ca.pem"
        assert security.peer_user == "broker-1" and "ops" in security.peer_users
        assert config["auth.tokens_file"] and config["tls.cert"]

    def test_token_commands_make_a_private_peer_token(self, tmp_path: Path) -> None:
        """The documented commands (run with /etc/skerry moved to a temporary folder) leave
        a peer.token of mode 0600 that the tokens file accepts for broker-1, and alice in
        the same file."""
        block = re.search(r"```sh\n(.*?)```", _security_section(), re.S)
        assert block
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for line in block.group(1).splitlines():
            command = line.split("   #", 1)[0].strip()
            if not command:
                continue
            command = command.replace("/etc/skerry", str(tmp_path)).replace(
                "python -m", f"{sys.executable} -m").replace(
                "skerry auth ", f"{sys.executable} -m broker auth ")
            subprocess.run(command, shell=True, check=True, cwd=tmp_path, env=env,
                           capture_output=True, timeout=60)
        token_path = tmp_path / "peer.token"
        assert token_path.stat().st_mode & 0o777 == 0o600
        token = read_peer_token(str(token_path))
        store = TokenStore.from_file(str(tmp_path / "tokens"))
        assert store.verify("broker-1", token) and store.users == ["alice", "broker-1"]
