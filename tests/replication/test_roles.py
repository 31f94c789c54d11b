"""Tests for replication/roles.py: the role machine and the persisted checkpoint shape."""

from __future__ import annotations

import pytest

from broker.errors import InvalidReplicaRequest
from broker.v1.errors import code_for
from replication.roles import (
    ROLE_TRANSITIONS,
    IllegalStateError,
    ReplicationCheckpoint,
    Role,
    check_transition,
    parse_role,
)


class RoleTests:

    def test_wire_words(self) -> None:
        """A role formats as the exact wire word SET_PARTITION_ROLE answers with."""
        assert f"role={Role.LEADER}" == "role=leader"
        assert f"role={Role.FOLLOWER}" == "role=follower"

    @pytest.mark.parametrize("text, role", [("leader", Role.LEADER),
                                            ("follower", Role.FOLLOWER),
                                            (Role.FOLLOWER, Role.FOLLOWER)])
    def test_parse_accepts_exact_names(self, text: str, role: Role) -> None:
        """Exactly ``leader`` and ``follower`` name a role."""
        assert parse_role(text) is role

    @pytest.mark.parametrize("text", ["Leader", "LEADER", "lead", "", " leader", "observer"])
    def test_parse_refuses_anything_else(self, text: str) -> None:
        """Any other role word is BAD_REQUEST with a usage hint and no '|'."""
        with pytest.raises(InvalidReplicaRequest) as caught:
            parse_role(text)
        assert code_for(caught.value) == "BAD_REQUEST"
        assert "expected leader or follower" in caught.value.message
        assert "|" not in caught.value.message

    def test_transitions_table(self) -> None:
        """Leader and follower may switch into each other; staying put is not a transition."""
        check_transition(Role.LEADER, Role.FOLLOWER)
        check_transition(Role.FOLLOWER, Role.LEADER)
        for role in Role:
            assert role not in ROLE_TRANSITIONS[role]
            with pytest.raises(IllegalStateError, match=f"before moving to {role}; is in {role}"):
                check_transition(role, role)


class CheckpointTests:

    def test_defaults_for_a_new_partition(self) -> None:
        """No document (a new partition) means leader, epoch 0, nothing committed, ISR [0]."""
        for empty in (None, {}):
            checkpoint = ReplicationCheckpoint.from_json(empty)
            assert checkpoint == ReplicationCheckpoint()
            assert (checkpoint.role, checkpoint.leader_epoch, checkpoint.hw, checkpoint.isr) == \
                (Role.LEADER, 0, -1, (0,))

    def test_round_trip(self) -> None:
        """What is written reads back identical, with string keys as JSON needs."""
        checkpoint = ReplicationCheckpoint(role=Role.FOLLOWER, leader_epoch=3, hw=41,
                                           isr=(0, 2), replica_offsets={1: 17, 2: 41})
        document = checkpoint.to_json()
        assert document == {"version": 1, "role": "follower", "leader_epoch": 3, "hw": 41,
                            "isr": [0, 2], "replica_offsets": {"1": 17, "2": 41}}
        assert ReplicationCheckpoint.from_json(document) == checkpoint

    def test_leader_always_in_restored_isr(self) -> None:
        """A document whose ISR lacks the leader still restores the leader in the ISR."""
        assert ReplicationCheckpoint.from_json({"isr": [2]}).isr == (0, 2)

    @pytest.mark.parametrize("document, field", [
        ({"version": 2}, "version"),
        ({"role": "boss"}, "role"),
        ({"leader_epoch": -1}, "leader_epoch"),
        ({"leader_epoch": "1"}, "leader_epoch"),
        ({"hw": -2}, "hw"),
        ({"hw": True}, "hw"),
        ({"isr": "0 1"}, "isr"),
        ({"isr": [0, -1]}, "isr"),
        ({"replica_offsets": [1, 2]}, "replica_offsets"),
        ({"replica_offsets": {"x": 1}}, "replica_offsets"),
        ({"replica_offsets": {"1": -5}}, "replica_offsets"),
    ])
    def test_damaged_document_is_reported(self, document: dict[str, object], field: str) -> None:
        """A damaged state document raises ValueError naming the bad field, never guesses."""
        with pytest.raises(ValueError, match=field):
            ReplicationCheckpoint.from_json(document)
