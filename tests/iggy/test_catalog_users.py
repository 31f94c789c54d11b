"""Unit tests of the Iggy catalog (streams and topics over store topics) and of the user
store (password hashes, tokens, permission rules), without a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from access import Authorizer, Operation, ResourceType
from broker.iggy.access import bindings_for, permissions_from
from broker.iggy.codec import GlobalPermissions, Permissions, StreamPermissions, TopicPermissions
from broker.iggy.errors import Status, status_for
from broker.services.errors import ServiceError
from broker.services.iggy_catalog import (
    STORE_PREFIX,
    Catalog,
    group_name_for_consumer,
    store_retention,
)
from broker.services.iggy_users import (
    UserStore,
    hash_password,
    verify_password,
)


class _Store:
    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def __call__(self) -> list[str]:
        return sorted(self.names)


def _catalog(tmp_path: Path, store: _Store) -> Catalog:
    return Catalog(str(tmp_path), store_topics=store, now_us=lambda: 5)


class CatalogTests:
    def test_first_start_adopts_v1_topics_in_name_order(self, tmp_path):
        """The first catalog has stream 0 "default" holding the store's V1 topics (ids by
        name order), never the reserved __iggy.* ones, and is written to iggy.json."""
        store = _Store("zeta", "alpha", f"{STORE_PREFIX}3")
        cat = _catalog(tmp_path, store)
        assert [(t.id, t.name, t.store) for t in cat.default.topics.values()] == \
            [(0, "alpha", "alpha"), (1, "zeta", "zeta")]
        doc = json.loads((tmp_path / "iggy.json").read_text())
        assert [s["name"] for s in doc["streams"]] == ["default"]
        assert cat.orphans() == [f"{STORE_PREFIX}3"]

    def test_default_follows_the_store_and_ids_are_not_reused(self, tmp_path):
        """Topics appearing in the store get the next id; vanished ones are dropped; an id
        is never given twice."""
        store = _Store("a")
        cat = _catalog(tmp_path, store)
        store.names = {"b"}
        assert cat.sync_default()
        assert [(t.id, t.name) for t in cat.default.topics.values()] == [(1, "b")]
        store.names = {"b", "a"}
        cat.sync_default()
        assert sorted((t.id, t.name) for t in cat.default.topics.values()) == [(1, "b"), (2, "a")]
        assert not cat.sync_default()

    def test_lookup_by_id_and_name_with_resync(self, tmp_path):
        """A default-stream miss re-syncs with the store; unknown streams and topics raise
        the id or the name flavour of "not found"."""
        store = _Store()
        cat = _catalog(tmp_path, store)
        has = store.names.__contains__
        assert cat.topic(cat.default, "late", has) is None
        store.names.add("late")
        assert cat.topic(cat.default, "late", has).id == 0
        with pytest.raises(ServiceError) as caught:
            cat.require_stream(4)
        assert status_for(caught.value) == Status.STREAM_ID_NOT_FOUND
        with pytest.raises(ServiceError) as caught:
            cat.require_topic(cat.default, "nope", has)
        assert status_for(caught.value) == Status.TOPIC_NAME_NOT_FOUND

    def test_store_names_for_other_streams_skip_taken_ones(self, tmp_path):
        """A non-default stream's topic goes to the next free __iggy.<n>; the default
        stream's topics keep their own names."""
        store = _Store(f"{STORE_PREFIX}0", f"{STORE_PREFIX}1")
        cat = _catalog(tmp_path, store)
        stream = cat.add_stream("s")
        assert cat.store_name_for(stream, "t") == f"{STORE_PREFIX}2"
        assert cat.store_name_for(stream, "u") == f"{STORE_PREFIX}3"
        assert cat.store_name_for(cat.default, "orders") == "orders"

    def test_names_and_persistence(self, tmp_path):
        """Bad and duplicate names are refused; streams, topics (settings included) and
        groups come back from iggy.json."""
        store = _Store()
        cat = _catalog(tmp_path, store)
        with pytest.raises(ServiceError):
            cat.add_stream("")
        with pytest.raises(ServiceError):
            cat.add_stream("tab\there")
        s = cat.add_stream("shop")
        with pytest.raises(ServiceError) as caught:
            cat.add_stream("shop")
        assert status_for(caught.value) == Status.STREAM_NAME_ALREADY_EXISTS
        store.names.add(f"{STORE_PREFIX}0")
        t = cat.add_topic(s, "orders", f"{STORE_PREFIX}0", compression=2, message_expiry=9,
                          max_topic_size=10, replication_factor=3)
        cat.add_group(t, "workers")
        with pytest.raises(ServiceError) as caught:
            cat.add_group(t, "iggy.consumer.7")
        assert status_for(caught.value) == Status.INVALID_CONSUMER_GROUP_NAME
        cat2 = _catalog(tmp_path, store)
        again = cat2.stream("shop").topic("orders")
        assert (again.id, again.store, again.compression, again.message_expiry,
                again.max_topic_size, again.replication_factor) == (0, f"{STORE_PREFIX}0", 2, 9, 10, 3)
        assert again.group("workers").id == 0

    def test_adopting_v1_groups_skips_consumer_pseudo_groups(self, tmp_path):
        """V1 groups get group ids in name order; iggy.consumer.* pseudo-groups do not."""
        store = _Store("t")
        cat = _catalog(tmp_path, store)
        topic = cat.default.topic("t")
        cat.adopt_groups(topic, ["b", group_name_for_consumer(4), "a"])
        assert [(g.id, g.name) for g in topic.groups.values()] == [(0, "a"), (1, "b")]
        assert group_name_for_consumer(4) == "iggy.consumer.4"
        assert group_name_for_consumer("x") == "iggy.consumer.name.x"

    @pytest.mark.parametrize(("expiry", "size", "partitions", "expected"), [
        (0, 0, 3, (None, None)),
        ((1 << 64) - 1, (1 << 64) - 1, 3, (None, None)),
        (1_500, 3_000, 3, (2, 1_000)),
        (5_000_000, 1, 4, (5_000, 1)),
    ])
    def test_retention(self, expiry, size, partitions, expected):
        """Expiry (µs) becomes retention_ms rounded up; max size is shared between the
        partitions; 0 and u64::MAX mean none."""
        assert store_retention(expiry, size, partitions) == expected


class PasswordTests:
    def test_scrypt_hash_round_trip(self):
        """A hash verifies its password only, carries its parameters and a random salt."""
        one = hash_password("s3cret", n=16)
        two = hash_password("s3cret", n=16)
        assert one.startswith("scrypt$16$8$1$") and one != two
        assert verify_password("s3cret", one) and verify_password("s3cret", two)
        assert not verify_password("s3cres", one)
        assert not verify_password("s3cret", "md5$x") and not verify_password("x", "garbage")


class UserStoreTests:
    def test_root_tokens_and_persistence(self, tmp_path):
        """initialize() creates root (id 0); users and token hashes persist; a token logs
        in until it expires or is deleted; the raw token is never written."""
        users = UserStore(str(tmp_path), now_us=lambda: 100)
        assert not users.initialized
        users.initialize("iggy", hash_password("iggy", n=16))
        bob = users.create("bob", hash_password("pw1", n=16), 1, None)
        raw = users.create_token(bob, "ci-1", 50, now_us=100)
        forever = users.create_token(bob, "ci-2", 0, now_us=100)
        assert raw not in (tmp_path / "iggy-users.json").read_text()
        again = UserStore(str(tmp_path), now_us=lambda: 100)
        assert again.login_token(raw, now_us=149).id == 1
        with pytest.raises(ServiceError) as caught:
            again.login_token(raw, now_us=150)
        assert status_for(caught.value) == Status.PERSONAL_ACCESS_TOKEN_EXPIRED
        assert [t.name for t in again.tokens(again.get("bob"), 150)] == ["ci-2"]
        again.delete_token(again.get(1), "ci-2")
        with pytest.raises(ServiceError) as caught:
            again.login_token(forever, now_us=150)
        assert status_for(caught.value) == Status.INVALID_PERSONAL_ACCESS_TOKEN
        with pytest.raises(ServiceError) as caught:
            again.delete(again.get(0))
        assert status_for(caught.value) == Status.CANNOT_DELETE_USER

    def test_a_damaged_permissions_blob_is_a_damaged_users_file(self, tmp_path):
        """A user's stored permissions blob that does not parse stops the load with one
        error naming the file, like any other damage (not an Iggy wire error)."""
        users = UserStore(str(tmp_path), now_us=lambda: 100)
        users.initialize("iggy", hash_password("iggy", n=16))
        users.create("bob", hash_password("pw1", n=16), 1, Permissions.root())
        path = tmp_path / "iggy-users.json"
        doc = json.loads(path.read_text())
        for user in doc["users"]:
            if user["username"] == "bob":
                user["permissions"] = user["permissions"][:-4]
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match="damaged users file"):
            UserStore(str(tmp_path), now_us=lambda: 100)


_TOPICS = {1: [(3, "t3"), (4, "t4")], 2: [(7, "__iggy.7"), (8, "__iggy.8")]}


def _may(perms: Permissions | None):
    """The decision the Iggy gate makes for user ``u`` holding ``perms`` as ACLs."""
    auth = Authorizer(enabled=True, acls=bindings_for("u", perms, lambda s: _TOPICS.get(s, [])))

    def may(op: str, kind: str, name: str = "kafka-cluster") -> bool:
        return auth.authorize("User:u", Operation(op), ResourceType(kind), name)

    return may


class PermissionMappingTests:
    def test_no_permissions_no_bindings(self):
        """A user without Iggy permissions gets no ACL: refused everything."""
        assert bindings_for("u", None, lambda s: []) == []
        may = _may(Permissions())
        assert not may("Read", "Topic", "t3") and not may("Describe", "Cluster")

    def test_global_stream_and_topic_levels(self):
        """Global flags cover every topic; a stream's flags cover its topics; a topic's
        flags that topic only; manage includes read and send, read includes poll."""
        perms = Permissions(
            GlobalPermissions(read_servers=True),
            ((1, StreamPermissions(read_stream=True, send_messages=True)),
             (2, StreamPermissions(topics=((7, TopicPermissions(manage_topic=True)),)))))
        may = _may(perms)
        assert may("Describe", "Cluster") and not may("Alter", "Cluster")
        assert may("Read", "Topic", "t3") and may("Write", "Topic", "t4")
        assert not may("Delete", "Topic", "t3")
        assert may("Delete", "Topic", "__iggy.7") and may("Read", "Topic", "__iggy.7")
        assert may("Write", "Topic", "__iggy.7") and may("Read", "Group", "any-group")
        assert not may("Read", "Topic", "__iggy.8")
        assert not may("Create", "Cluster")
        g = _may(Permissions(GlobalPermissions(manage_topics=True)))
        assert g("Create", "Topic", "anything") and g("Read", "Topic", "__iggy.9")
        assert not g("Create", "Cluster")

    def test_read_back_for_get_user(self):
        """GetUser shows the bindings as Iggy flags again: a topic's read and send."""
        perms = Permissions(GlobalPermissions(read_topics=True), (
            (2, StreamPermissions(topics=((7, TopicPermissions(send_messages=True)),))),))
        acls = bindings_for("u", perms, lambda s: _TOPICS.get(s, []))
        back = permissions_from("u", acls, lambda n: (2, 7) if n == "__iggy.7" else None)
        assert back is not None and back.global_.read_topics and back.global_.poll_messages
        assert not back.global_.send_messages
        topic = back.stream(2).topic(7)
        assert topic is not None and topic.send_messages and not topic.manage_topic
        assert permissions_from("nobody", acls, lambda n: None) is None
