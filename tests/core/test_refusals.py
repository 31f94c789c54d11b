"""Topic and group requests the broker refuses because honouring them would leave a broken
or colliding state: a name whose quarantined folder waits for the operator, a replication
factor a cluster cannot place, and the Iggy transport's internal names over V1.

Driven in memory (``InMemoryBroker``: the real core, handlers and store over ``tmp_path``,
``task.Clock``, StringTransport connections); clusters through the in-memory cluster of
``tests/replication/cluster_harness.py``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from access import NotAuthorized
from broker.client.codec import encode_batch
from broker.core import ProduceRequest
from broker.errors import InvalidTopicName, UnknownTopic
from broker.iggy.codec.messages import encode_messages
from data import paths
from tests.reliability.inmemory import InMemoryBroker
from tests.support import ROOT, BrokerProcess


def ask(h: InMemoryBroker, line: str) -> str:
    """One request on a fresh connection; its one reply line."""
    proto, tr = h.connect()
    (reply,) = h.request(proto, tr, line)
    return reply.decode()


def quarantine(data: Path, topic: str, **config: Any) -> InMemoryBroker:
    """A broker over ``data`` in which ``topic`` (created, given a message, then its
    topic.json damaged while the broker was down) was quarantined by the store at start."""
    h = InMemoryBroker(data, **config)
    if h.broker.core.store.topic(topic) is None:  # else created from the config
        assert ask(h, f"V1|1|ADMIN_CREATE_TOPIC|{topic} 2 1").startswith("V1|1|OK|")
    assert ask(h, f"V1|2|PRODUCE|{topic} k:kept partition=1") == "V1|2|OK|partition=1 offset=0 hw=0"
    h.close()
    with open(paths.topic_config_path(paths.topic_dir(str(data), topic)), "w") as f:
        f.write("{not json")
    h = InMemoryBroker(data, **config)
    assert h.broker.core.store.topic(topic) is None
    assert os.path.isdir(paths.quarantined_topic_dir(str(data), topic))
    return h


class QuarantinedTopicTests:
    """A topic whose topic.json could not be read sits in ``topics/~bad-<name>``; neither
    auto-create nor an explicit create may put a new empty topic in its place."""

    @pytest.mark.parametrize("line", [
        "V1|5|PRODUCE|orders k:v",  # the PRODUCE fast path
        "V1|5|PRODUCE|orders k:v acks=all partition=0",  # the full parser
        "V1|5|CONSUME|orders 0 0",
        "V1|5|JOIN|g orders c1",
        "V1|5|ADMIN_CREATE_TOPIC|orders 1 1",
    ])
    def test_create_is_refused_naming_the_folder(self, tmp_path: Path, line: str) -> None:
        """Auto-create (PRODUCE, CONSUME, JOIN) and ADMIN_CREATE_TOPIC answer BAD_REQUEST
        naming the quarantined folder and the fix, and create nothing; other names are
        unaffected."""
        data = tmp_path / "data"
        h = quarantine(data, "orders")
        try:
            bad = paths.quarantined_topic_dir(str(data), "orders")
            assert ask(h, line) == (f"V1|5|ERR|BAD_REQUEST|topic orders is quarantined at "
                                    f"{bad}: repair or remove it first (docs/operations.md, "
                                    f"Recovering a damaged log)")
            assert h.broker.core.store.topic("orders") is None
            assert sorted(os.listdir(paths.topics_dir(str(data)))) == ["~bad-orders"]
            assert ask(h, "V1|6|PRODUCE|other k:v").startswith("V1|6|OK|")
        finally:
            h.close()

    def test_documented_repair_brings_the_topic_back(self, tmp_path: Path) -> None:
        """After a refused auto-create, the fix of docs/operations.md (repair topic.json,
        rename the folder back, start) gives the topic back with its messages."""
        data = tmp_path / "data"
        h = quarantine(data, "orders")
        assert ask(h, "V1|5|PRODUCE|orders k:v").startswith("V1|5|ERR|BAD_REQUEST|")
        h.close()
        bad = paths.quarantined_topic_dir(str(data), "orders")
        with open(paths.topic_config_path(bad), "w") as f:
            f.write('{"partitions": 2, "replication_factor": 1, "min_insync_replicas": 1}')
        os.rename(bad, paths.topic_dir(str(data), "orders"))
        h = InMemoryBroker(data)
        try:
            assert ask(h, "V1|6|CONSUME|orders 1 0") == "V1|6|OK|messages=0:kept hw=0"
        finally:
            h.close()

    def test_configured_topic_is_not_created_and_the_broker_starts(
            self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """A topic of the ``topics:`` section that is quarantined is not created at start;
        the broker starts with everything else and logs why."""
        data = tmp_path / "data"
        topics = {"orders": {"partitions": 2}, "fresh": {"partitions": 1}}
        h = quarantine(data, "orders", topics=topics)
        h.close()
        with caplog.at_level(logging.ERROR, logger="skerry.core"):
            h = InMemoryBroker(data, topics=topics)
        try:
            store = h.broker.core.store
            assert store.topic("orders") is None and store.topic("fresh") is not None
            assert "topic orders of the configuration not created: topic orders is " \
                   "quarantined at" in caplog.text
        finally:
            h.close()


class ReplicationFactorTests:
    """A cluster member refuses a topic whose replication factor its ``cluster`` section
    cannot place (more replicas than brokers, or not what an explicit replica list says).
    Before, the store created the topic and the replication layer then failed on it:
    INTERNAL, and a topic left behind that every later request (and a restart) trips on."""

    def test_cluster_refuses_more_replicas_than_brokers(self, tmp_path: Path) -> None:
        """ADMIN_CREATE_TOPIC with RF 4 on a 3-broker cluster: BAD_REQUEST saying so, and
        no topic; RF 3 is fine."""
        from tests.replication.cluster_harness import Network

        net = Network(tmp_path, count=3)
        client = net.client(0)
        assert client.request("ADMIN_CREATE_TOPIC|big 1 4") == (
            "V1|1|ERR|BAD_REQUEST|replication factor 4 is larger than the number of "
            "brokers (3)")
        assert client.request("METADATA|").startswith("V1|2|OK|topics=[t] brokers=[0@")
        assert client.request("ADMIN_CREATE_TOPIC|fits 2 3") == \
            "V1|3|OK|topic=fits partitions=2 replication_factor=3 term=1 index=1"

    def test_cluster_refuses_what_an_explicit_replica_list_contradicts(
            self, tmp_path: Path) -> None:
        """With ``cluster.replicas.pinned`` listing two brokers per partition, RF 3 is
        refused for ``pinned`` by ADMIN_CREATE_TOPIC, and so is auto-create with the default
        RF 1; nothing is created."""
        from tests.replication.cluster_harness import Network

        net = Network(tmp_path, count=3, start=False)
        for node in net.nodes.values():
            node.config["cluster"]["replicas"] = {"pinned": [[0, 1]]}
            node.config["auto_create_topics"] = True
        net.start(0)
        client = net.client(0)
        assert client.request("ADMIN_CREATE_TOPIC|pinned 1 3") == (
            "V1|1|ERR|BAD_REQUEST|cluster.replicas.pinned[0] lists 2 brokers but the "
            "topic's replication factor is 3")
        assert client.request("PRODUCE|pinned k:v").startswith(
            "V1|2|ERR|BAD_REQUEST|cluster.replicas.pinned[0] lists 2 brokers")
        assert client.request("METADATA|").startswith("V1|3|OK|topics=[t] brokers=[0@")

    def test_single_broker_refuses_an_admin_replication_factor_it_cannot_place(
            self, tmp_path: Path) -> None:
        """A single broker has no follower: ADMIN_CREATE_TOPIC (what ``skerry topics
        create --replication-factor`` sends) with RF > 1 is refused and creates nothing,
        as Kafka refuses a factor larger than its brokers."""
        h = InMemoryBroker(tmp_path / "data")
        try:
            reply = ask(h, "V1|1|ADMIN_CREATE_TOPIC|y 1 3")
            assert reply.startswith(
                "V1|1|ERR|BAD_REQUEST|replication factor 3 is larger than the number of "
                "brokers (1): a single broker has no follower to copy it to"), reply
            assert ask(h, "V1|2|METADATA|") == "V1|2|OK|topics=[]"
            assert ask(h, "V1|3|ADMIN_CREATE_TOPIC|y 1 1") == \
                "V1|3|OK|topic=y partitions=1 replication_factor=1 term=1 index=1"
        finally:
            h.close()

    def test_single_broker_keeps_the_spec_replication_model_for_declared_topics(
            self, tmp_path: Path) -> None:
        """A topic declared in the config with RF > 1 stays accepted: the V1 spec's
        single-broker replication has REPLICA_FETCH reports stand in for followers
        1 .. RF-1 (tests/replication/test_single_broker_e2e.py)."""
        h = InMemoryBroker(tmp_path / "data",
                           topics={"payments": {"partitions": 1, "replication_factor": 3}})
        try:
            assert ask(h, "V1|2|REPLICA_FETCH|payments 0 2 0").startswith("V1|2|OK|replica=2 ")
        finally:
            h.close()


BATCH = "data=" + base64.b64encode(encode_batch([b"k"], [b"v"])).decode()
TOPIC_REFUSED = "topic {} is reserved for the Iggy transport's internal use"
GROUP_REFUSED = "group {} is reserved for the Iggy transport's internal use"


def internal_broker(data: Path) -> InMemoryBroker:
    """A broker holding what the Iggy transport leaves in the store: ``__iggy.0`` (a topic
    of a stream other than ``default``, one message) and the pseudo-group
    ``iggy.consumer.1`` (a plain Iggy consumer's offset) on the V1 topic ``shared``, both
    made through the core as the Iggy handlers make them."""
    h = InMemoryBroker(data, topics={"shared": {"partitions": 1}})
    core = h.broker.core
    core.create_topic("__iggy.0", 1, 1, None, None, None)
    core.produce(ProduceRequest("__iggy.0", 0, "1", framed=encode_messages([b"iggy-message"])),
                 lambda result: None)
    core.produce(ProduceRequest("shared", 0, "1", (b"",), (b"v1-message",)), lambda result: None)
    h.settle()
    core.groups.admin_commit("iggy.consumer.1", "shared", 0, 1)
    h.settle()
    return h


class ReservedNameTests:
    """V1 may not create, write, reshape or group-consume the Iggy transport's internal
    topics (``__iggy.*``), nor touch its consumers' pseudo-groups (``iggy.consumer.*``);
    reading and describing them stays allowed (docs/protocol.md, Reserved names)."""

    @pytest.mark.parametrize("line, refused", [
        ("PRODUCE|__iggy.0 k:v", TOPIC_REFUSED.format("__iggy.0")),  # the fast path
        ("PRODUCE|__iggy.0 k:v partition=0 acks=all", TOPIC_REFUSED.format("__iggy.0")),
        ("PRODUCE|__iggy.7 k:v", TOPIC_REFUSED.format("__iggy.7")),  # would auto-create
        ("PRODUCE_BATCH|__iggy.0 0 " + BATCH, TOPIC_REFUSED.format("__iggy.0")),
        ("CONSUME|__iggy.7 0 0", TOPIC_REFUSED.format("__iggy.7")),  # would auto-create
        ("ADMIN_CREATE_TOPIC|__iggy.7 1 1", TOPIC_REFUSED.format("__iggy.7")),
        ("ADMIN_DELETE_TOPIC|__iggy.0", TOPIC_REFUSED.format("__iggy.0")),
        ("ADMIN_ADD_PARTITIONS|__iggy.0 2", TOPIC_REFUSED.format("__iggy.0")),
        ("JOIN|g __iggy.0 c1", TOPIC_REFUSED.format("__iggy.0")),
        ("SYNC|g __iggy.0 c1 1", TOPIC_REFUSED.format("__iggy.0")),
        ("HEARTBEAT|g __iggy.0 c1 1", TOPIC_REFUSED.format("__iggy.0")),
        ("LEAVE|g __iggy.0 c1 1", TOPIC_REFUSED.format("__iggy.0")),
        ("COMMIT|g __iggy.0 c1 1 0 0", TOPIC_REFUSED.format("__iggy.0")),
        ("ADMIN_COMMIT|g __iggy.0 0 0", TOPIC_REFUSED.format("__iggy.0")),
        ("ADMIN_RESET_OFFSETS|g __iggy.0 earliest", TOPIC_REFUSED.format("__iggy.0")),
        ("ADMIN_DELETE_GROUP|g __iggy.0", TOPIC_REFUSED.format("__iggy.0")),
        ("JOIN|iggy.consumer.1 shared c1", GROUP_REFUSED.format("iggy.consumer.1")),
        ("JOIN|iggy.consumer.9 fresh c1", GROUP_REFUSED.format("iggy.consumer.9")),
        ("SYNC|iggy.consumer.1 shared c1 1", GROUP_REFUSED.format("iggy.consumer.1")),
        ("HEARTBEAT|iggy.consumer.1 shared c1 1", GROUP_REFUSED.format("iggy.consumer.1")),
        ("LEAVE|iggy.consumer.1 shared c1 1", GROUP_REFUSED.format("iggy.consumer.1")),
        ("COMMIT|iggy.consumer.1 shared c1 1 0 0", GROUP_REFUSED.format("iggy.consumer.1")),
        ("ADMIN_COMMIT|iggy.consumer.1 shared 0 0", GROUP_REFUSED.format("iggy.consumer.1")),
        ("ADMIN_RESET_OFFSETS|iggy.consumer.1 shared earliest",
         GROUP_REFUSED.format("iggy.consumer.1")),
        ("ADMIN_DELETE_GROUP|iggy.consumer.1 shared", GROUP_REFUSED.format("iggy.consumer.1")),
    ])
    def test_writes_creates_and_group_operations_are_refused(
            self, tmp_path: Path, line: str, refused: str) -> None:
        """Each is BAD_REQUEST saying the name is reserved, and changes nothing: no topic
        created, deleted or grown, no message appended, no group or offset changed."""
        h = internal_broker(tmp_path / "data")
        try:
            core = h.broker.core
            before = ({n: t.config for n, t in core.store.topics.items()},
                      core.hw("__iggy.0", 0), core.groups.list_groups(),
                      core.groups.offset("iggy.consumer.1", "shared", 0))
            reply = ask(h, f"V1|5|{line}")
            assert reply.startswith(f"V1|5|ERR|BAD_REQUEST|{refused} "), reply
            after = ({n: t.config for n, t in core.store.topics.items()},
                     core.hw("__iggy.0", 0), core.groups.list_groups(),
                     core.groups.offset("iggy.consumer.1", "shared", 0))
            assert after == before
        finally:
            h.close()

    @pytest.mark.parametrize("line, reply", [
        ("CONSUME|__iggy.0 0 0", "V1|5|OK|messages=0:iggy-message hw=0"),
        ("FETCH|__iggy.0 0 0", "V1|5|OK|hw=0 start=0 next=1 count=1 data="),
        ("OFFSETS|__iggy.0 0", "V1|5|OK|earliest=0 latest=1"),
        ("METADATA|", "V1|5|OK|topics=[__iggy.0 shared]"),
        ("METADATA|__iggy.0", "V1|5|OK|topic=__iggy.0 partitions=1 replication_factor=1 "),
        ("OFFSET|iggy.consumer.1 shared 0", "V1|5|OK|offset=1"),
        ("DESCRIBE_GROUP|iggy.consumer.1 shared", "V1|5|OK|state=empty generation=0 "),
        ("LIST_GROUPS|", "V1|5|OK|groups=[iggy.consumer.1:shared]"),
        ("SET_PARTITION_ROLE|__iggy.0 0 follower",
         "V1|5|OK|topic=__iggy.0 partition=0 role=follower hw=0"),
    ])
    def test_reads_and_operator_views_stay_allowed(self, tmp_path: Path, line: str,
                                                   reply: str) -> None:
        """Reading an internal topic, describing it and the pseudo-groups, and the
        replication commands (failover of every partition) work as for any name."""
        h = internal_broker(tmp_path / "data")
        try:
            assert ask(h, f"V1|5|{line}").startswith(reply)
        finally:
            h.close()

    def test_documented_refusals_are_the_broker_s(self, tmp_path: Path) -> None:
        """The two examples of docs/protocol.md (Reserved names) are the broker's exact
        replies."""
        text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
        section = text.split("### Reserved names (additive)", 1)[1].split("\n### ", 1)[0]
        examples = re.findall(r"^(V1\|\S*\|[A-Z_]+\|.*?)\s+->\s+(V1\|.*)$", section, re.M)
        assert len(examples) == 2
        h = internal_broker(tmp_path / "data")
        try:
            for request, reply in examples:
                assert ask(h, request) == reply
        finally:
            h.close()

    def test_the_iggy_transport_still_uses_its_names(self, tmp_path: Path) -> None:
        """The reservation is V1's: the core (what the Iggy handlers call) still creates,
        writes and deletes ``__iggy.*`` topics and commits ``iggy.consumer.*`` offsets."""
        h = internal_broker(tmp_path / "data")
        try:
            core = h.broker.core
            assert core.store.topic("__iggy.0") is not None
            assert core.groups.offset("iggy.consumer.1", "shared", 0) == 1
            core.delete_topic("__iggy.0")
            assert core.store.topic("__iggy.0") is None
        finally:
            h.close()


def free_port() -> int:
    """A loopback port free right now (for a config that must name its own address)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def skerry(proc: BrokerProcess, *args: str) -> subprocess.CompletedProcess[bytes]:
    """One ``skerry`` command against ``proc``, as a person runs it (stdout, stderr, exit)."""
    env = dict(os.environ, SKERRY_BOOTSTRAP=f"127.0.0.1:{proc.port}")
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True,
                          cwd=ROOT, env=env, timeout=60)


class CliTests:
    """The refusals as an operator meets them: real broker processes, the ``skerry`` CLI."""

    def test_topics_create_beyond_the_cluster_is_refused(self, tmp_path: Path) -> None:
        """On a cluster member (a one-broker cluster here) ``skerry topics create y
        --replication-factor 3`` exits 1 with the broker's reason and creates nothing;
        ``--replication-factor 1`` works."""
        port = free_port()
        config = {"cluster": {"broker_id": 0, "brokers": {0: f"127.0.0.1:{port}"}}}
        with BrokerProcess(tmp_path, config, port=port) as proc:
            refused = skerry(proc, "topics", "create", "y", "--replication-factor", "3")
            assert (refused.returncode, refused.stdout, refused.stderr) == (
                1, b"", b"skerry topics create: replication factor 3 is larger than the "
                        b"number of brokers (1)\n")
            assert json.loads(skerry(proc, "topics", "list", "--json").stdout) == []
            created = skerry(proc, "topics", "create", "y", "--partitions", "1")
            assert created.stdout == b"created topic y: 1 partition, replication factor 1\n"

    def test_topics_list_hides_internal_topics_unless_asked(self, tmp_path: Path) -> None:
        """``skerry topics list`` leaves out the Iggy transport's ``__iggy.*`` store topics
        (table and --json); ``--internal`` lists them with the others."""
        from data.store import Store, TopicConfig

        seeded = Store(str(tmp_path / "skerry-data"))  # as the Iggy transport leaves them
        seeded.create_topic("__iggy.0", TopicConfig(partitions=1))
        seeded.create_topic("orders", TopicConfig(partitions=2))
        seeded.close()
        with BrokerProcess(tmp_path) as proc:
            plain = json.loads(skerry(proc, "topics", "list", "--json").stdout)
            assert [t["topic"] for t in plain] == ["orders"]
            table = skerry(proc, "topics", "list").stdout.decode().splitlines()
            assert [line.split()[0] for line in table[1:]] == ["orders"]
            full = json.loads(skerry(proc, "topics", "list", "--internal", "--json").stdout)
            assert [t["topic"] for t in full] == ["__iggy.0", "orders"]
            table = skerry(proc, "topics", "list", "--internal").stdout.decode().splitlines()
            assert [line.split()[0] for line in table[1:]] == ["__iggy.0", "orders"]

    def test_the_cli_hides_what_the_iggy_transport_names(self) -> None:
        """The CLI (a client: it must not import the server side) keeps its own copy of the
        internal-topic prefix; it is the Iggy mapping's."""
        from broker.cli.admin import INTERNAL_GROUP_PREFIX, INTERNAL_TOPIC_PREFIX
        from broker.services.iggy_catalog import CONSUMER_GROUP_PREFIX, STORE_PREFIX

        assert INTERNAL_TOPIC_PREFIX == STORE_PREFIX
        assert INTERNAL_GROUP_PREFIX == CONSUMER_GROUP_PREFIX


class _FakeGroupsBroker:
    """Answers LIST_GROUPS and DESCRIBE_GROUP as a broker with one V1 group and one group
    of the Iggy transport's (which V1 cannot create, so it is seeded here)."""

    DESCRIBED = ("state=stable generation=1 assignor=round_robin members=[c:0] "
                 "partitions=[0] committed=[0] hw=[-1] lag=[0]")

    async def request(self, command: str, args: str = "") -> Any:
        from broker.client.codec import Reply

        assert command == "LIST_GROUPS"
        return Reply(True, None, "groups=[analytics:orders iggy.consumer.1.1:__iggy.1]")

    def send(self, command: str, args: str = "") -> Any:
        return args

    async def wait(self, future: Any, command: str, check: bool = True) -> Any:
        from broker.client.codec import Reply

        return Reply(True, None, self.DESCRIBED)


class GroupListTests:
    def test_groups_list_hides_the_iggy_transport_s_groups_unless_asked(self) -> None:
        """``skerry groups list`` leaves out ``iggy.consumer.*`` groups, as ``topics list``
        leaves out ``__iggy.*`` topics; ``--internal`` lists them too."""
        import asyncio

        from broker.cli import admin

        plain = asyncio.run(admin.list_groups(_FakeGroupsBroker()))
        assert [g["group"] for g in plain] == ["analytics"]
        full = asyncio.run(admin.list_groups(_FakeGroupsBroker(), internal=True))
        assert [g["group"] for g in full] == ["analytics", "iggy.consumer.1.1"]


class AutoCreatePermissionTests:
    """The one auto-create policy (``Topics.resolve``) asks a transport's own permission
    (Kafka Metadata's Create ACL) only when it would create, and creates nothing when the
    permission says no."""

    def test_a_refused_permission_creates_nothing(self, tmp_path: Path) -> None:
        h = InMemoryBroker(tmp_path)
        core = h.broker.core
        with pytest.raises(NotAuthorized):
            core.resolve("fresh", None, True, lambda: False)
        assert core.topic_config("fresh") is None
        assert core.resolve("fresh", None, True, lambda: True).config.partitions >= 1
        h.close()

    def test_the_permission_is_not_asked_when_the_policy_would_not_create(
            self, tmp_path: Path) -> None:
        h = InMemoryBroker(tmp_path, auto_create_topics=False)
        asked: list[str] = []
        with pytest.raises(UnknownTopic):
            h.broker.core.resolve("fresh", None, True, lambda: asked.append("x") or True)
        with pytest.raises(InvalidTopicName):
            h.broker.core.resolve("bad name!", None, True, lambda: asked.append("x") or True)
        assert asked == []
        h.close()
