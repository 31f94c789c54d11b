"""Random histories of one partition under the control plane's rules (Hypothesis): appends,
fetches, ISR shrinks and expansions through etcd (committed only when their txn wins),
broker deaths and returns with the controller's election. With unclean election off, an
elected leader never misses an offset that was ever committed (``hw`` reached it).

The model keeps log *ends* (last offsets, -1: empty): a follower's log is a prefix of its
leader's, cut back to the new leader's end after an election (KIP-101 truncation). A
follower learns the leader's ``hw`` with each fetch, one fetch late, and a new leader starts
from the ``hw`` it learnt, as in Kafka."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.control.election import elect_leader
from replication.control.errors import ControlError
from replication.control.isr import IsrView
from replication.control.keys import NO_LEADER, PartitionState

REPLICAS = (0, 1, 2)
ACTIONS = ("append", "fetch", "shrink", "expand", "answer", "kill", "revive")


@dataclass
class Model:
    unclean: bool = False
    shrink_counts_early: bool = False     # mutants: rules the tests below must catch
    no_epoch_bar: bool = False
    state: PartitionState = field(default_factory=lambda: PartitionState.initial(REPLICAS))
    mod: int = 1
    alive: set[int] = field(default_factory=lambda: set(REPLICAS))
    ends: dict[int, int] = field(default_factory=lambda: dict.fromkeys(REPLICAS, -1))
    known_hw: dict[int, int] = field(default_factory=lambda: dict.fromkeys(REPLICAS, -1))
    view: IsrView = field(default_factory=lambda: IsrView(frozenset(REPLICAS)))
    proposal_mod: int = 0
    hw: int = -1
    epoch_start: int = -1
    committed: int = -1                   # the largest offset hw ever reached
    violations: list[str] = field(default_factory=list)

    @property
    def leader(self) -> int:
        return self.state.leader

    def waited_for(self) -> frozenset[int]:
        if self.shrink_counts_early and self.view.pending is not None:
            return self.view.pending
        return self.view.maximal

    def advance_hw(self) -> None:
        hw = min(self.ends[r] for r in self.waited_for() | {self.leader})
        self.hw = max(self.hw, hw)
        self.committed = max(self.committed, self.hw)

    def step(self, action: str, replica: int, amount: int) -> None:
        leading = self.leader != NO_LEADER and self.leader in self.alive
        try:
            if action == "append" and leading:
                self.ends[self.leader] += amount
                self.advance_hw()
            elif action == "fetch" and leading and replica in self.alive \
                    and replica != self.leader:
                self.ends[replica] = min(self.ends[self.leader], self.ends[replica] + amount)
                self.known_hw[replica] = self.hw
                self.advance_hw()
            elif action == "shrink" and leading:
                self.view = self.view.propose_shrink({replica}, leader=self.leader)
                self.proposal_mod = self.mod
            elif action == "expand" and leading and replica in self.alive:
                self.view = self.view.propose_expand(replica, self.ends[replica], self.hw,
                                                     epoch_start_offset=-1 if self.no_epoch_bar
                                                     else self.epoch_start)
                self.proposal_mod = self.mod
            elif action == "answer" and leading and self.view.in_flight:
                self.isr_txn_answered()
            elif action == "kill" and replica in self.alive:
                self.alive.discard(replica)
                self.elect()
            elif action == "revive" and replica not in self.alive:
                self.alive.add(replica)
                if self.leader != NO_LEADER and self.leader in self.alive:
                    self.ends[replica] = min(self.ends[replica], self.ends[self.leader])
                self.elect()
        except ControlError:
            pass    # a refused proposal changes nothing

    def isr_txn_answered(self) -> None:
        # write_isr compares MOD(key) (and the leader's lease: it is alive here).
        assert self.view.pending is not None
        if self.proposal_mod == self.mod:
            self.state = PartitionState(self.leader, self.state.leader_epoch,
                                        tuple(sorted(self.view.pending)))
            self.mod += 1
            self.view = self.view.committed_as_proposed()
        else:
            self.view = self.view.reread(self.state.isr)
        self.advance_hw()

    def elect(self) -> None:
        before = self.state
        result = elect_leader(before, REPLICAS, self.alive, unclean_allowed=self.unclean,
                              log_end_by_replica=self.ends)
        if not result.changed:
            return
        self.state = result.state
        self.mod += 1
        leader = self.leader
        if leader == NO_LEADER:
            return
        if not result.unclean and self.ends[leader] < self.committed:
            self.violations.append(f"elected {leader} holding up to {self.ends[leader]}, "
                                   f"committed up to {self.committed}")
        self.view = IsrView(frozenset(self.state.isr))
        if leader != before.leader:
            self.hw = self.known_hw[leader]
            self.epoch_start = self.ends[leader]
            for r in REPLICAS:
                if r != leader and r in self.alive:
                    self.ends[r] = min(self.ends[r], self.ends[leader])


histories = st.lists(st.tuples(st.sampled_from(ACTIONS), st.sampled_from(REPLICAS),
                               st.integers(1, 3)), max_size=80)


@settings(max_examples=400, deadline=None)
@given(histories)
def test_clean_election_never_loses_a_committed_offset(history) -> None:  # noqa: ANN001
    """Whatever happens, with unclean election off every elected leader holds every
    offset that was committed before its election."""
    model = Model()
    for action, replica, amount in history:
        model.step(action, replica, amount)
        assert not model.violations, (model.violations, history)


@settings(max_examples=200, deadline=None)
@given(histories)
def test_offline_rather_than_unclean(history) -> None:  # noqa: ANN001
    """With unclean election off, a partition with no live ISR member stays offline with
    its ISR kept: the ISR is never empty and never names a replica outside the list."""
    model = Model()
    for action, replica, amount in history:
        model.step(action, replica, amount)
        assert model.state.isr and set(model.state.isr) <= set(REPLICAS)
        if model.leader != NO_LEADER:
            assert model.leader in model.state.isr


def test_a_shrink_counting_before_commit_loses_data() -> None:
    """The mutant the first property guards against: if a shrink counted while its txn was
    in flight, a leader death before the txn answered elects a replica missing a committed
    offset."""
    history = [("shrink", 1, 1), ("append", 0, 1), ("fetch", 2, 1), ("kill", 0, 1)]
    honest, mutant = Model(), Model(shrink_counts_early=True)
    for step in history:
        honest.step(*step)
        mutant.step(*step)
    assert honest.violations == [] and honest.committed == -1
    assert mutant.violations == ["elected 1 holding up to -1, committed up to 0"]


def test_expansion_without_epoch_start_loses_data() -> None:
    """The other guard: a new leader's ``hw`` lags its predecessor's; admitting a follower
    on "progress >= hw" alone, then losing that leader, elects a replica missing a
    committed offset. The epoch-start bar refuses the follower."""
    history = [("shrink", 2, 1), ("answer", 0, 1),          # ISR {0, 1}
               ("append", 0, 1), ("fetch", 1, 1),            # hw 0: committed; 1 learns -1
               ("kill", 0, 1),                               # 1 leads, its hw is -1
               ("expand", 2, 1), ("answer", 0, 1),           # 2 holds nothing
               ("kill", 1, 1)]
    honest, mutant = Model(), Model(no_epoch_bar=True)
    for step in history:
        honest.step(*step)
        mutant.step(*step)
    assert honest.violations == [] and honest.state == PartitionState(NO_LEADER, 2, (1,))
    assert mutant.violations == ["elected 2 holding up to -1, committed up to 0"]
