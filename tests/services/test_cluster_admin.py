"""The seed broker's five admin commands on a broker without etcd: exact reply shapes
(golden lines), ``term=1`` and an ``index`` that grows by one per change and survives a
restart, refusals that change nothing, and the forced-election rule.

Driven in memory (``InMemoryBroker``: the real core, handlers and store over ``tmp_path``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.services.cluster_admin import METADATA_FILE
from replication.control.keys import PartitionState
from tests.reliability.inmemory import InMemoryBroker


def ask(h: InMemoryBroker, line: str) -> str:
    proto, tr = h.connect()
    (reply,) = h.request(proto, tr, line)
    return reply.decode()


GOLDEN = [
    ("V1|1|ADMIN_GET_METADATA|", "V1|1|OK|topics=[] brokers=[]"),
    ("V1|2|ADMIN_CREATE_TOPIC|orders 3 1",
     "V1|2|OK|topic=orders partitions=3 replication_factor=1 term=1 index=1"),
    ("V1|3|ADMIN_REGISTER_BROKER|2 127.0.0.1 9093",
     "V1|3|OK|broker_id=2 host=127.0.0.1 port=9093 term=1 index=2"),
    ("V1|4|ADMIN_REGISTER_BROKER|1 10.0.0.1 9092 3",
     "V1|4|OK|broker_id=1 host=10.0.0.1 port=9092 term=1 index=3"),
    ("V1|5|ADMIN_BROKER_HEARTBEAT|1", "V1|5|OK|broker_id=1 heartbeat=ok term=1 index=3"),
    ("V1|6|ADMIN_SET_PARTITION_LEADER|orders 0 1 1,2",
     "V1|6|OK|topic=orders partition=0 leader=1 isr=[1 2] term=1 index=4"),
    ("V1|7|ADMIN_CREATE_TOPIC|audit 1 1 retention_ms=60000",
     "V1|7|OK|topic=audit partitions=1 replication_factor=1 term=1 index=5"),
    ("V1|8|ADMIN_GET_METADATA|", "V1|8|OK|topics=[audit orders] brokers=[1 2]"),
]


class AdminGoldenTests:
    def test_the_five_commands_answer_the_seed_shapes(self, tmp_path: Path) -> None:
        """Each command's reply is exactly the contract's line; the index moves by one per
        change (create, register, forced leader) and not for a heartbeat or a read."""
        h = InMemoryBroker(tmp_path / "data")
        try:
            assert [ask(h, line) for line, _ in GOLDEN] == [want for _, want in GOLDEN]
        finally:
            h.close()

    def test_index_survives_a_restart_and_keeps_growing(self, tmp_path: Path) -> None:
        """After a restart the recorded brokers, leaders and index are as they were; the
        next change takes the next index (never reused, never back to 1)."""
        h = InMemoryBroker(tmp_path / "data")
        try:
            for line, _ in GOLDEN:
                ask(h, line)
        finally:
            h.close()
        again = InMemoryBroker(tmp_path / "data")
        try:
            assert ask(again, "V1|1|ADMIN_GET_METADATA|") == \
                "V1|1|OK|topics=[audit orders] brokers=[1 2]"
            assert ask(again, "V1|2|ADMIN_BROKER_HEARTBEAT|2") == \
                "V1|2|OK|broker_id=2 heartbeat=ok term=1 index=5"
            # broker 2 was in the recorded ISR [1 2] of orders/0: it may be elected
            assert ask(again, "V1|3|ADMIN_SET_PARTITION_LEADER|orders 0 2 2,1") == \
                "V1|3|OK|topic=orders partition=0 leader=2 isr=[2 1] term=1 index=6"
            assert ask(again, "V1|4|ADMIN_CREATE_TOPIC|later 1 1") == \
                "V1|4|OK|topic=later partitions=1 replication_factor=1 term=1 index=7"
        finally:
            again.close()
        stored = json.loads((tmp_path / "data" / METADATA_FILE).read_text())
        assert stored["index"] == 7 and stored["term"] == 1

    @pytest.mark.parametrize(("line", "message"), [
        ("ADMIN_SET_PARTITION_LEADER|orders 0 3 3", "broker 3 is not in the partition's ISR"),
        ("ADMIN_SET_PARTITION_LEADER|orders 0 9 9", "unknown broker 9"),
        ("ADMIN_SET_PARTITION_LEADER|orders 0 1 2", "must include the leader 1"),
        ("ADMIN_SET_PARTITION_LEADER|orders 7 1 1", "partition 7 out of range"),
        ("ADMIN_SET_PARTITION_LEADER|nosuch 0 1 1", "unknown topic"),
        ("ADMIN_SET_PARTITION_LEADER|orders 0 1 1,x", "isr must be a non-negative integer"),
        ("ADMIN_SET_PARTITION_LEADER|orders 0 1 1,1", "listed twice"),
        ("ADMIN_BROKER_HEARTBEAT|7", "unknown broker 7; register it first"),
        ("ADMIN_REGISTER_BROKER|1 10.0.0.1 9092 2", "epoch 2 is stale"),
        ("ADMIN_REGISTER_BROKER|1 10.0.0.1 0", "port must be between 1 and 65535"),
        ("ADMIN_REGISTER_BROKER|1 bad|host 1", "malformed envelope"),
        ("ADMIN_REGISTER_BROKER|1 10.0.0.1", "expects 3 or 4 positional arguments"),
        ("ADMIN_CREATE_TOPIC|orders 3 1", "topic already exists"),
        ("ADMIN_GET_METADATA|x", "takes exactly 0 positional arguments"),
    ])
    def test_refusals_are_bad_request_and_change_nothing(self, tmp_path: Path, line: str,
                                                         message: str) -> None:
        """A refused admin command answers BAD_REQUEST naming the reason, and the next
        change still takes the next index (the refusal wrote nothing)."""
        h = InMemoryBroker(tmp_path / "data")
        try:
            for setup, _ in GOLDEN:
                ask(h, setup)
            ask(h, "V1|9|ADMIN_REGISTER_BROKER|3 127.0.0.1 9094")  # index 6, not in any ISR
            reply = ask(h, f"V1|10|{line}")
            assert reply.startswith("V1|"), reply
            assert "|ERR|BAD_REQUEST|" in reply and message in reply, reply
            assert ask(h, "V1|11|ADMIN_BROKER_HEARTBEAT|3") == \
                "V1|11|OK|broker_id=3 heartbeat=ok term=1 index=6"
        finally:
            h.close()


def test_docs_examples_are_answered_as_shown(tmp_path: Path) -> None:
    """The example exchange of docs/protocol.md's control-plane section, replayed on a
    fresh broker, answers line for line as the page shows."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    section = text.split("### The control plane's admin commands", 1)[1].split("\n### ", 1)[0]
    pairs = [tuple(part.strip() for part in line.split("->")) for line in section.splitlines()
             if line.startswith("V1|") and "->" in line]
    assert len(pairs) == 5
    h = InMemoryBroker(tmp_path / "data")
    try:
        assert [ask(h, request) for request, _ in pairs] == [want for _, want in pairs]
    finally:
        h.close()


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_lets_a_leader_outside_the_isr_through(tmp_path: Path,
                                                                 unclean: bool) -> None:
    """``LocalControl`` with unclean election allowed (``cluster.unclean_leader_election``)
    accepts a leader outside the recorded ISR, in the next epoch; without, it refuses and
    records nothing."""
    from broker.errors import InvalidReplicaRequest
    from broker.services.cluster_admin import LocalControl

    control = LocalControl(str(tmp_path), create_locally=lambda *a: None,
                           topic_names=lambda: ["t"], check_partition=lambda t, p: None,
                           unclean_allowed=unclean)
    for broker in (1, 2):
        control.register_broker(broker, "127.0.0.1", 9090 + broker, None)
    control.elect("t", 0, 1, (1,))
    results: list[object] = []
    control.elect("t", 0, 2, (2,)).addBoth(results.append)
    if unclean:
        assert results[0].index == 4  # type: ignore[attr-defined]
        assert control.state.leader_of("t", 0) == PartitionState(2, 1, (2,))
    else:
        assert isinstance(results[0].value, InvalidReplicaRequest)  # type: ignore[attr-defined]
        assert "not in the partition's ISR [1]" in results[0].value.message  # type: ignore[attr-defined]
        assert control.state.index == 3 and control.state.leader_of("t", 0).leader == 1


@pytest.mark.parametrize("command", ["ADMIN_REGISTER_BROKER", "ADMIN_BROKER_HEARTBEAT",
                                     "ADMIN_SET_PARTITION_LEADER", "ADMIN_GET_METADATA"])
def test_any_arguments_parse_or_are_refused_cleanly(command: str) -> None:
    """Whatever follows the command name, the codec gives a command or a protocol-shaped
    refusal (CommandError), never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from broker.v1.codec import Codec, CommandError

    codec = Codec()
    alphabet = st.sampled_from(list("0123456789,:.[] abc-_\u00e9\t"))

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet, max_size=40))
    def check(args: str) -> None:
        try:
            parsed = codec.parse_command(f"V1|1|{command}|{args}".encode())
        except CommandError as refused:
            assert refused.reply().startswith(b"V1|")
            return
        assert parsed is not None and parsed.name == command

    check()
