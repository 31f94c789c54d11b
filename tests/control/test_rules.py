"""The control plane's pure rules: key layout and values, election, committed/pending ISR,
txn builders (tables of input -> expected), and the modules' doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replication.control.election import elect_leader
from replication.control.errors import (
    BadKey,
    InvalidIsr,
    IsrChangeInFlight,
    MalformedValue,
    NotCaughtUp,
    NotPartitionLeader,
)
from replication.control.isr import IsrView
from replication.control.keys import (
    NO_LEADER,
    BrokerKey,
    BrokerRegistration,
    ControllerKey,
    ControllerRecord,
    KeyLayout,
    PartitionKey,
    PartitionState,
    TopicKey,
    TopicRecord,
    prefix_range_end,
)
from replication.control.txn import (
    Compare,
    Get,
    PartitionWrite,
    Put,
    Target,
    claim_controller,
    create_topic,
    register_broker,
    write_isr,
    write_partitions,
)

LAYOUT = KeyLayout("prod-1")


@pytest.mark.parametrize("module", ["keys", "election", "isr", "txn", "preferred"])
def test_doctests(module: str) -> None:
    """The worked examples in the modules' docstrings hold."""
    result = doctest.testmod(importlib.import_module(f"replication.control.{module}"))
    assert result.failed == 0


class KeyLayoutTests:
    @pytest.mark.parametrize("key, parsed", [
        ("/skerry/prod-1/brokers/0", BrokerKey(0)),
        ("/skerry/prod-1/brokers/12", BrokerKey(12)),
        ("/skerry/prod-1/controller", ControllerKey()),
        ("/skerry/prod-1/topics/orders.v2", TopicKey("orders.v2")),
        ("/skerry/prod-1/partitions/orders/7", PartitionKey("orders", 7)),
    ])
    def test_round_trip(self, key: str, parsed: object) -> None:
        """Every key shape parses back to what built it."""
        assert LAYOUT.parse(key) == parsed
        built = {BrokerKey: lambda k: LAYOUT.broker(k.broker_id),
                 ControllerKey: lambda k: LAYOUT.controller,
                 TopicKey: lambda k: LAYOUT.topic(k.topic),
                 PartitionKey: lambda k: LAYOUT.partition(k.topic, k.partition)}
        assert built[type(parsed)](parsed) == key

    @pytest.mark.parametrize("key", [
        "/skerry/other/brokers/0", "/skerry/prod-1/brokers/x", "/skerry/prod-1/brokers/01",
        "/skerry/prod-1/partitions/orders", "/skerry/prod-1/partitions/a/b/1",
        "/skerry/prod-1/controller/x", "/skerry/prod-1/topics/a b", "/skerry/prod-1/",
    ])
    def test_foreign_keys_refused(self, key: str) -> None:
        """A key outside the layout is refused, not guessed at."""
        with pytest.raises(BadKey):
            LAYOUT.parse(key)

    @pytest.mark.parametrize("bad", ["", "a/b", "..", "x" * 65, "a b"])
    def test_bad_cluster_id(self, bad: str) -> None:
        """A cluster id that could escape its prefix is refused."""
        with pytest.raises(BadKey):
            KeyLayout(bad)

    def test_bad_names_in_keys(self) -> None:
        """Topic names with a slash and negative ids never make a key."""
        for build in (lambda: LAYOUT.topic("a/b"), lambda: LAYOUT.partition("t", -1),
                      lambda: LAYOUT.broker(True)):
            with pytest.raises(BadKey):
                build()

    def test_prefix_range_end(self) -> None:
        """The range end of a prefix is the prefix with its last byte incremented (0xff
        bytes carried)."""
        assert prefix_range_end(b"/a/") == b"/a0"
        assert prefix_range_end(b"a\xff") == b"b"
        assert prefix_range_end(b"\xff\xff") == b"\x00"


class ValueTests:
    def test_round_trips(self) -> None:
        """Each record encodes to compact JSON and decodes to itself."""
        topic = TopicRecord(2, 3, 2, ((0, 1, 2), (1, 2, 0)), {"retention_ms": 1000})
        for record in (BrokerRegistration("10.0.0.1:9092", 3), ControllerRecord(1), topic,
                       PartitionState(2, 7, (2, 0))):
            assert type(record).decode(record.encode()) == record
        assert PartitionState(-1, 1, (1,)).encode() == \
            b'{"isr":[1],"leader":-1,"leader_epoch":1}'

    def test_unknown_fields_ignored(self) -> None:
        """A newer writer's extra fields are ignored."""
        raw = b'{"leader":1,"leader_epoch":2,"isr":[1],"new":true}'
        assert PartitionState.decode(raw) == PartitionState(1, 2, (1,))

    @pytest.mark.parametrize("raw", [
        b"", b"[]", b"{", b'{"leader":1,"leader_epoch":2}',
        b'{"leader":true,"leader_epoch":2,"isr":[1]}',
        b'{"leader":-2,"leader_epoch":2,"isr":[1]}',
        b'{"leader":1,"leader_epoch":"2","isr":[1]}',
        b'{"leader":1,"leader_epoch":2,"isr":[1,1]}',
        b'\xff',
    ])
    def test_malformed_partition_state(self, raw: bytes) -> None:
        """A value that is not the documented shape is refused as malformed."""
        with pytest.raises(MalformedValue):
            PartitionState.decode(raw)

    @pytest.mark.parametrize("raw", [
        b'{"partitions":2,"replication_factor":2,"min_isr":1,"replicas":[[0,1]]}',
        b'{"partitions":1,"replication_factor":2,"min_isr":3,"replicas":[[0,1]]}',
        b'{"partitions":1,"replication_factor":2,"min_isr":1,"replicas":[[0,0]]}',
        b'{"partitions":1,"replication_factor":2,"min_isr":1,"replicas":[[0,1]],"settings":1}',
    ])
    def test_malformed_topic(self, raw: bytes) -> None:
        """A topic whose replica lists disagree with its shape is refused."""
        with pytest.raises(MalformedValue):
            TopicRecord.decode(raw)

    def test_unclean_setting(self) -> None:
        """Unclean election is on only when the setting is literally true."""
        base = dict(partitions=1, replication_factor=1, min_isr=1, replicas=((0,),))
        assert TopicRecord(**base, settings={"unclean_leader_election": True}) \
            .unclean_leader_election
        assert not TopicRecord(**base, settings={"unclean_leader_election": "yes"}) \
            .unclean_leader_election


class ElectionTests:
    R = (0, 1, 2)

    @pytest.mark.parametrize("state, alive, expected, offline", [
        # The leader lives: it stays; dead followers leave the ISR; the epoch holds.
        ((0, 3, (0, 1, 2)), {0, 1, 2}, (0, 3, (0, 1, 2)), False),
        ((0, 3, (0, 1, 2)), {0, 2}, (0, 3, (0, 2)), False),
        # The leader died: first replica in list order that is in the ISR and alive.
        ((0, 3, (0, 1, 2)), {1, 2}, (1, 4, (1, 2)), False),
        ((0, 3, (0, 2)), {1, 2}, (2, 4, (2,)), False),
        ((0, 3, (2, 0, 1)), {1, 2}, (1, 4, (1, 2)), False),
        # No live ISR member: offline, ISR kept, the epoch moves once.
        ((0, 3, (0,)), {1, 2}, (NO_LEADER, 4, (0,)), True),
        ((NO_LEADER, 4, (0,)), {1, 2}, (NO_LEADER, 4, (0,)), True),
        # The last ISR member is back: it leads the next epoch.
        ((NO_LEADER, 4, (0,)), {0, 1}, (0, 5, (0,)), False),
    ])
    def test_clean(self, state, alive, expected, offline) -> None:  # noqa: ANN001
        """The spec's election rule, case by case."""
        current = PartitionState(*state)
        result = elect_leader(current, self.R, alive)
        assert result.state == PartitionState(*expected)
        assert result.offline is offline and not result.unclean
        assert result.changed is (result.state != current)

    def test_unclean_largest_log_end(self) -> None:
        """Unclean on and no live ISR member: the live replica with the largest log end
        leads alone, flagged; ties go to replica-list order."""
        current = PartitionState(0, 3, (0,))
        result = elect_leader(current, self.R, {1, 2}, unclean_allowed=True,
                              log_end_by_replica={1: 5, 2: 9})
        assert result.state == PartitionState(2, 4, (2,)) and result.unclean
        tie = elect_leader(current, self.R, {1, 2}, unclean_allowed=True,
                           log_end_by_replica={1: 9, 2: 9})
        assert tie.state.leader == 1

    def test_unclean_prefers_clean(self) -> None:
        """Unclean on changes nothing while an ISR member lives."""
        result = elect_leader(PartitionState(0, 3, (0, 2)), self.R, {1, 2},
                              unclean_allowed=True, log_end_by_replica={1: 99})
        assert result.state.leader == 2 and not result.unclean

    def test_unclean_newer_epoch_ranks_first(self) -> None:
        """With last epochs known, a longer log whose last record is of an older epoch
        (a deposed leader's tail) loses to the newer history; equal epochs: log end."""
        current = PartitionState(NO_LEADER, 5, (0,))
        result = elect_leader(current, self.R, {1, 2}, unclean_allowed=True,
                              log_end_by_replica={1: 10, 2: 15},
                              last_epoch_by_replica={1: 4, 2: 3})
        assert result.state == PartitionState(1, 6, (1,)) and result.unclean
        same = elect_leader(current, self.R, {1, 2}, unclean_allowed=True,
                            log_end_by_replica={1: 10, 2: 15},
                            last_epoch_by_replica={1: 4, 2: 4})
        assert same.state.leader == 2

    def test_unclean_without_log_ends_takes_list_order(self) -> None:
        """Nothing reported (the controller's wait ran out): replica-list order; a replica
        that reported beats one that did not."""
        current = PartitionState(NO_LEADER, 5, (0,))
        assert elect_leader(current, self.R, {2, 1}, unclean_allowed=True).state.leader == 1
        assert elect_leader(current, self.R, {1, 2}, unclean_allowed=True,
                            log_end_by_replica={2: 0}).state.leader == 2

    @given(st.permutations([0, 1, 2, 3, 4]), st.sets(st.integers(0, 4), min_size=1),
           st.dictionaries(st.integers(0, 4), st.integers(0, 50)),
           st.dictionaries(st.integers(0, 4), st.integers(-1, 6)), st.booleans())
    def test_unclean_picks_the_most_up_to_date_live_replica(
            self, replicas: list[int], alive: set[int], ends: dict[int, int],
            epochs: dict[int, int], with_epochs: bool) -> None:
        """Every ISR member dead: the leader is a live replica, alone in the ISR, no live
        replica has a newer (last epoch, log end), and among equals it comes first in list
        order. Without epochs this is the largest log end."""
        isr_member = replicas[0]
        alive = alive - {isr_member}
        if not alive:
            return
        last = epochs if with_epochs else {}
        current = PartitionState(isr_member, 3, (isr_member,))
        result = elect_leader(current, replicas, alive, unclean_allowed=True,
                              log_end_by_replica=ends, last_epoch_by_replica=last)
        leader = result.state.leader
        assert result.unclean and leader in alive and result.state.isr == (leader,)
        assert result.state.leader_epoch == 4

        def rank(r: int) -> tuple[int, int]:
            return last.get(r, -1), ends.get(r, -1)

        for other in alive:
            assert rank(other) <= rank(leader)
            if rank(other) == rank(leader):
                assert replicas.index(leader) <= replicas.index(other)
        if not with_epochs:
            assert ends.get(leader, -1) == max(ends.get(r, -1) for r in alive)

    def test_unclean_nobody_alive(self) -> None:
        """Unclean on but no replica alive: offline."""
        result = elect_leader(PartitionState(0, 3, (0,)), self.R, set(),
                              unclean_allowed=True)
        assert result.offline and result.state.leader == NO_LEADER


class IsrViewTests:
    def test_expand_counts_at_once(self) -> None:
        """A caught-up follower proposed for the ISR counts for hw before the txn answers."""
        view = IsrView(frozenset({0, 1})).propose_expand(2, progress=10, high_watermark=10)
        assert view.maximal == {0, 1, 2} and view.committed == {0, 1} and view.in_flight
        assert view.committed_as_proposed() == IsrView(frozenset({0, 1, 2}))

    def test_expand_needs_progress_at_hw(self) -> None:
        """A follower below hw is not proposed."""
        with pytest.raises(NotCaughtUp):
            IsrView(frozenset({0})).propose_expand(1, progress=9, high_watermark=10)

    def test_shrink_counts_once_committed(self) -> None:
        """A proposed shrink keeps waiting for the dropped replica until its txn commits;
        a lost txn leaves the ISR as it was."""
        view = IsrView(frozenset({0, 1, 2})).propose_shrink({1, 2}, leader=0)
        assert view.maximal == {0, 1, 2}
        assert view.abandoned().maximal == {0, 1, 2} and not view.abandoned().in_flight
        assert view.committed_as_proposed().maximal == {0}

    def test_one_change_in_flight(self) -> None:
        """A second proposal while one is in flight is refused and changes nothing."""
        view = IsrView(frozenset({0, 1, 2})).propose_shrink({2}, leader=0)
        with pytest.raises(IsrChangeInFlight):
            view.propose_shrink({1}, leader=0)
        with pytest.raises(IsrChangeInFlight):
            view.propose_expand(3, 5, 5)
        assert view == IsrView(frozenset({0, 1, 2}), frozenset({0, 1}))

    @pytest.mark.parametrize("out", [{0}, set(), {3}])
    def test_invalid_shrinks(self, out: set[int]) -> None:
        """The leader cannot drop itself, nor drop nobody or a non-member."""
        with pytest.raises(InvalidIsr):
            IsrView(frozenset({0, 1})).propose_shrink(out, leader=0)

    def test_min_isr_counts_committed(self) -> None:
        """min ISR is checked against the committed ISR."""
        view = IsrView(frozenset({0})).propose_expand(1, 0, 0)
        assert not view.min_isr_met(2) and view.committed_as_proposed().min_isr_met(2)

    def test_reread_drops_proposal(self) -> None:
        """Reading the key again makes its ISR the committed one, proposal dropped."""
        view = IsrView(frozenset({0, 1})).propose_shrink({1}, leader=0)
        assert view.reread([0, 2]) == IsrView(frozenset({0, 2}))


class TxnBuilderTests:
    def test_register_broker(self) -> None:
        """CREATE == 0, put with the lease, read back on failure."""
        txn = register_broker(LAYOUT, 1, BrokerRegistration("h:1", 2), lease=77)
        key = "/skerry/prod-1/brokers/1"
        assert txn.compare == (Compare(key, Target.CREATE, 0),)
        assert txn.success == (Put(key, b'{"addr":"h:1","incarnation":2}', 77),)
        assert txn.failure == (Get(key),)

    def test_claim_controller(self) -> None:
        """Only absent, and only while this broker holds its registration lease."""
        txn = claim_controller(LAYOUT, 1, lease=77)
        assert txn.compare == (Compare(LAYOUT.controller, Target.CREATE, 0),
                               Compare(LAYOUT.broker(1), Target.LEASE, 77))
        assert txn.success == (Put(LAYOUT.controller, b'{"broker":1}', 77),)

    def test_create_topic(self) -> None:
        """The topic and all its partitions, initial states, in one txn."""
        record = TopicRecord(2, 2, 1, ((0, 1), (1, 0)))
        txn = create_topic(LAYOUT, "t", record)
        assert [op.key for op in txn.success] == [LAYOUT.topic("t"), LAYOUT.partition("t", 0),
                                                  LAYOUT.partition("t", 1)]
        assert PartitionState.decode(txn.success[2].value) == PartitionState(1, 0, (1, 0))

    def test_write_partitions_compares_controller_epoch(self) -> None:
        """Every controller txn compares the controller key's create revision, and each
        partition key's mod revision."""
        w = PartitionWrite("t", 0, 41, PartitionState(1, 5, (1,)))
        txn = write_partitions(LAYOUT, 17, [w])
        assert txn.compare == (Compare(LAYOUT.controller, Target.CREATE, 17),
                               Compare(LAYOUT.partition("t", 0), Target.MOD, 41))
        with pytest.raises(ValueError):
            write_partitions(LAYOUT, 17, [])

    def test_write_isr(self) -> None:
        """The leader's ISR txn compares MOD(key) and LEASE(brokers/<me>); only the leader,
        and never without itself."""
        w = PartitionWrite("t", 0, 41, PartitionState(1, 5, (1, 2)))
        txn = write_isr(LAYOUT, 1, 77, w)
        assert txn.compare == (Compare(LAYOUT.partition("t", 0), Target.MOD, 41),
                               Compare(LAYOUT.broker(1), Target.LEASE, 77))
        with pytest.raises(NotPartitionLeader):
            write_isr(LAYOUT, 2, 77, w)
        with pytest.raises(InvalidIsr):
            write_isr(LAYOUT, 1, 77, PartitionWrite("t", 0, 41, PartitionState(1, 5, (2,))))

    def test_compare_value_types(self) -> None:
        """A VALUE compare takes bytes, the others ints."""
        with pytest.raises(TypeError):
            Compare("k", Target.VALUE, 1)
        with pytest.raises(TypeError):
            Compare("k", Target.MOD, b"1")
