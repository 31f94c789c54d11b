"""The Iggy shell: the root-credential rule, first start versus later starts, tidying the
store at start (orphans, stale group members, retention) and the wiring into the broker."""

from __future__ import annotations

import pytest

from broker.config import config_from_mapping
from broker.core.durability import synchronous
from broker.iggy.service import is_loopback, root_credentials
from broker.server import build_broker
from broker.services.iggy_catalog import STORE_PREFIX
from tests.iggy.harness import Harness, err, ident, name8, ok, u32, u64


def _login(conn, username: str, password: str) -> bytes:
    return conn.request(38, name8(username) + name8(password) + u32(0) + u32(0))


class RootCredentialTests:
    @pytest.mark.parametrize(("host", "expected"), [
        ("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("localhost", True),
        ("0.0.0.0", False), ("10.1.2.3", False), ("::", False), ("example.org", False),
    ])
    def test_loopback_addresses(self, host, expected):
        """Only localhost, 127.0.0.0/8 and ::1 count as loopback."""
        assert is_loopback(host) is expected

    def test_rule(self):
        """Config keys win over the environment; neither means iggy/iggy on loopback and
        a refusal elsewhere; half a pair is refused."""
        empty = config_from_mapping({})
        both = config_from_mapping({"iggy": {"root_username": "admin", "root_password": "pw1"}})
        env = {"IGGY_ROOT_USERNAME": "envuser", "IGGY_ROOT_PASSWORD": "envpw"}
        assert root_credentials(empty, {}, "127.0.0.1") == ("iggy", "iggy")
        assert root_credentials(empty, env, "0.0.0.0") == ("envuser", "envpw")
        assert root_credentials(both, env, "0.0.0.0") == ("admin", "pw1")
        with pytest.raises(ValueError, match="needs root credentials"):
            root_credentials(empty, {}, "0.0.0.0")
        with pytest.raises(ValueError, match="not one"):
            root_credentials(config_from_mapping({"iggy": {"root_username": "x"}}), {}, "::1")

    def test_a_public_listener_refuses_to_start_without_credentials(self, tmp_path):
        """On a non-loopback address, prepare() refuses without explicit credentials and
        creates no user; with them, root gets exactly those credentials."""
        h = Harness(tmp_path, prepare=False)
        with pytest.raises(ValueError, match="needs root credentials"):
            h.service.prepare("0.0.0.0")
        assert not (tmp_path / "data" / "iggy-users.json").exists()
        h.close()
        h2 = Harness(tmp_path, environ={"IGGY_ROOT_USERNAME": "boss",
                                        "IGGY_ROOT_PASSWORD": "s3cret"}, host="0.0.0.0")
        conn = h2.connect()
        assert _login(conn, "iggy", "iggy") == err(42)
        assert _login(conn, "boss", "s3cret") == ok(u32(0))
        h2.close()

    def test_a_public_listener_needs_credentials_on_later_starts_too(self, tmp_path):
        """A data directory whose root was created on loopback with the default password
        does not start on a public address without explicit credentials."""
        Harness(tmp_path).close()
        h = Harness(tmp_path, prepare=False)
        with pytest.raises(ValueError, match="needs explicit root credentials"):
            h.service.prepare("0.0.0.0")
        h.close()
        h2 = Harness(tmp_path, environ={"IGGY_ROOT_USERNAME": "iggy", "IGGY_ROOT_PASSWORD": "x"},
                     host="0.0.0.0")
        assert _login(h2.connect(), "iggy", "iggy") == ok(u32(0))
        h2.close()

    def test_credentials_only_create_root_on_the_first_start(self, tmp_path):
        """Later starts keep the stored root password (changed over the protocol) even
        when the configured credentials say otherwise."""
        h = Harness(tmp_path, {"iggy": {"root_username": "root1", "root_password": "first"}})
        conn = h.connect()
        assert _login(conn, "root1", "first") == ok(u32(0))
        assert conn.request(37, ident(0) + name8("first") + name8("second")) == ok()
        h.close()
        h2 = Harness(tmp_path, {"iggy": {"root_username": "root1", "root_password": "first"}})
        conn2 = h2.connect()
        assert _login(conn2, "root1", "first") == err(42)
        assert _login(conn2, "root1", "second") == ok(u32(0))
        h2.close()


class StartTests:
    def test_orphaned_store_topics_are_removed(self, tmp_path):
        """A __iggy.<n> store topic no stream owns (a create or delete interrupted) is
        removed at start; V1 topics are left alone."""
        h = Harness(tmp_path)
        h.core.create_topic(f"{STORE_PREFIX}77", 1, 1, None, None, None)
        h.core.create_topic("v1topic", 1, 1, None, None, None)
        h.close()
        h2 = Harness(tmp_path)
        assert sorted(h2.core.store.topics) == ["v1topic"]
        h2.close()

    def test_stale_members_and_retention_after_a_restart(self, tmp_path):
        """Members a previous run's Iggy clients left in a group are removed at start
        (their connections are gone), and topic retention changed by UpdateTopic is
        applied again."""
        h = Harness(tmp_path)
        conn = h.connect(login=True)
        conn.request(202, name8("s"))
        conn.request(302, ident("s") + u32(2) + b"\x01" + u64(0) + u64(0) + b"\x00" + name8("t"))
        st = ident("s") + ident("t")
        conn.request(602, st + name8("g"))
        assert conn.request(604, st + ident("g")) == ok()
        assert conn.request(304, st + b"\x01" + u64(3_000_000) + u64(0) + b"\x00" + name8("t")) == ok()
        store = h.service.catalog.stream("s").topic("t").store
        h.service.stop()
        h.broker.core.stop()
        h.advance(1)
        h2 = Harness(tmp_path)
        group = h2.core.groups.coordinator.group("g", store)
        assert group is not None and not group.members
        assert h2.core.store.topics[store].config.retention_ms == 3000
        h2.close()


class WiringTests:
    def test_build_broker_adds_the_iggy_transport_only_when_configured(self, tmp_path):
        """build_broker builds the Iggy service when iggy_port is set, and none when it is
        null (the default)."""
        off = build_broker(config_from_mapping({"data_dir": str(tmp_path / "a")}), _clock(),
                           run_in_thread=synchronous)
        assert off.iggy is None
        on = build_broker(config_from_mapping({"data_dir": str(tmp_path / "b"), "iggy_port": 0}),
                          _clock(), run_in_thread=synchronous)
        assert on.iggy is not None
        assert (tmp_path / "b" / "iggy.json").exists()
        off.core.stop()
        on.core.stop()


def _clock():
    from twisted.internet.task import Clock

    return Clock()
