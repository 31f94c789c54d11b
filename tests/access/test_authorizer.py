"""The authorizer's decisions, table-driven after Kafka's AclAuthorizer tests
(AuthorizerTest: deny takes precedence, allow-all, super users, wildcard resources and
principals, no ACL found, implied Describe, prefixed patterns)."""

from __future__ import annotations

import pytest

from access import AclBinding, Authorizer, InvalidAcl, Operation, PatternType, Permission
from access import ResourceType as RT
from access.authorizer import AclFilter

Op = Operation
ALLOW, DENY = Permission.ALLOW, Permission.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(principal: str, rt: RT, name: str, op: Op, perm: Permission = ALLOW,
        pattern: PatternType = LIT) -> AclBinding:
    return AclBinding(principal, rt, name, pattern, op, perm)


ALICE, BOB = "User:alice", "User:bob"

# (description, acls, principal, operation, resource type, name, expected)
CASES = [
    ("no ACL for the resource: refused", [], ALICE, Op.READ, RT.TOPIC, "orders", False),
    ("literal allow", [acl(ALICE, RT.TOPIC, "orders", Op.READ)], ALICE, Op.READ, RT.TOPIC,
     "orders", True),
    ("allow is per principal", [acl(ALICE, RT.TOPIC, "orders", Op.READ)], BOB, Op.READ,
     RT.TOPIC, "orders", False),
    ("allow is per operation", [acl(ALICE, RT.TOPIC, "orders", Op.READ)], ALICE, Op.WRITE,
     RT.TOPIC, "orders", False),
    ("allow is per resource", [acl(ALICE, RT.TOPIC, "orders", Op.READ)], ALICE, Op.READ,
     RT.TOPIC, "payments", False),
    ("allow is per resource type", [acl(ALICE, RT.TOPIC, "billing", Op.READ)], ALICE, Op.READ,
     RT.GROUP, "billing", False),
    ("deny takes precedence",
     [acl(ALICE, RT.TOPIC, "orders", Op.READ), acl(ALICE, RT.TOPIC, "orders", Op.READ, DENY)],
     ALICE, Op.READ, RT.TOPIC, "orders", False),
    ("a wildcard-principal deny beats a user's allow",
     [acl(ALICE, RT.TOPIC, "orders", Op.WRITE), acl("User:*", RT.TOPIC, "orders", Op.WRITE,
                                                  DENY)],
     ALICE, Op.WRITE, RT.TOPIC, "orders", False),
    ("deny All denies Read", [acl(ALICE, RT.TOPIC, "*", Op.READ),
                              acl(ALICE, RT.TOPIC, "orders", Op.ALL, DENY)],
     ALICE, Op.READ, RT.TOPIC, "orders", False),
    ("allow All allows Write", [acl(ALICE, RT.TOPIC, "orders", Op.ALL)], ALICE, Op.WRITE,
     RT.TOPIC, "orders", True),
    ("wildcard resource", [acl(ALICE, RT.TOPIC, "*", Op.READ)], ALICE, Op.READ, RT.TOPIC,
     "anything", True),
    ("wildcard principal", [acl("User:*", RT.TOPIC, "orders", Op.READ)], BOB, Op.READ,
     RT.TOPIC, "orders", True),
    ("Read implies Describe", [acl(ALICE, RT.TOPIC, "orders", Op.READ)], ALICE, Op.DESCRIBE,
     RT.TOPIC, "orders", True),
    ("Write implies Describe", [acl(ALICE, RT.TOPIC, "orders", Op.WRITE)], ALICE, Op.DESCRIBE,
     RT.TOPIC, "orders", True),
    ("Delete implies Describe", [acl(ALICE, RT.GROUP, "g", Op.DELETE)], ALICE, Op.DESCRIBE,
     RT.GROUP, "g", True),
    ("Alter implies Describe", [acl(ALICE, RT.TOPIC, "t", Op.ALTER)], ALICE, Op.DESCRIBE,
     RT.TOPIC, "t", True),
    ("AlterConfigs implies DescribeConfigs", [acl(ALICE, RT.TOPIC, "t", Op.ALTER_CONFIGS)],
     ALICE, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t", True),
    ("Describe does not imply Read", [acl(ALICE, RT.TOPIC, "t", Op.DESCRIBE)], ALICE, Op.READ,
     RT.TOPIC, "t", False),
    ("a deny of Read does not deny Describe",
     [acl(ALICE, RT.TOPIC, "t", Op.READ, DENY), acl(ALICE, RT.TOPIC, "t", Op.DESCRIBE)],
     ALICE, Op.DESCRIBE, RT.TOPIC, "t", True),
    ("prefixed allow matches the prefix", [acl(ALICE, RT.TOPIC, "team-a.", Op.WRITE,
                                               pattern=PRE)],
     ALICE, Op.WRITE, RT.TOPIC, "team-a.events", True),
    ("prefixed allow matches the prefix itself", [acl(ALICE, RT.TOPIC, "team-a.", Op.WRITE,
                                                      pattern=PRE)],
     ALICE, Op.WRITE, RT.TOPIC, "team-a.", True),
    ("prefixed allow does not match another prefix",
     [acl(ALICE, RT.TOPIC, "team-a.", Op.WRITE, pattern=PRE)], ALICE, Op.WRITE, RT.TOPIC,
     "team-b.events", False),
    ("literal does not match as a prefix", [acl(ALICE, RT.TOPIC, "team-a.", Op.WRITE)],
     ALICE, Op.WRITE, RT.TOPIC, "team-a.events", False),
    ("a literal deny beats a prefixed allow",
     [acl(ALICE, RT.TOPIC, "team-a.", Op.WRITE, pattern=PRE),
      acl(ALICE, RT.TOPIC, "team-a.secret", Op.WRITE, DENY)],
     ALICE, Op.WRITE, RT.TOPIC, "team-a.secret", False),
    ("a prefixed deny beats a literal allow",
     [acl(ALICE, RT.TOPIC, "team-a.x", Op.WRITE), acl(ALICE, RT.TOPIC, "team-a", Op.WRITE,
                                                     DENY, PRE)],
     ALICE, Op.WRITE, RT.TOPIC, "team-a.x", False),
    ("cluster action", [acl(ALICE, RT.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)], ALICE,
     Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster", True),
    ("an ACL for another principal still counts as 'an ACL found'",
     [acl(BOB, RT.TOPIC, "orders", Op.READ)], ALICE, Op.READ, RT.TOPIC, "orders", False),
]


class AuthorizeTests:
    @pytest.mark.parametrize(("desc", "acls", "principal", "op", "rt", "name", "expected"),
                             CASES, ids=[c[0] for c in CASES])
    def test_decision(self, desc: str, acls: list[AclBinding], principal: str, op: Op,
                      rt: RT, name: str, expected: bool) -> None:
        """Each row: the decision Kafka's AclAuthorizer makes for the same rules."""
        auth = Authorizer(enabled=True, acls=acls)
        assert auth.authorize(principal, op, rt, name) is expected
        assert auth.authorize(principal, op, rt, name) is expected  # cached: same answer

    def test_super_user_may_do_everything(self) -> None:
        """A super user passes even an explicit deny and a resource with no ACL."""
        auth = Authorizer(enabled=True, super_users=["User:root"],
                          acls=[acl("User:*", RT.TOPIC, "orders", Op.ALL, DENY)])
        assert auth.authorize("User:root", Op.DELETE, RT.TOPIC, "orders")
        assert auth.authorize("User:root", Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
        assert not auth.authorize(ALICE, Op.READ, RT.TOPIC, "orders")

    def test_disabled_allows_everything(self) -> None:
        """Without authentication every request passes, ACLs or not (loopback development)."""
        auth = Authorizer(enabled=False, acls=[acl(ALICE, RT.TOPIC, "t", Op.ALL, DENY)])
        assert auth.authorize(ALICE, Op.WRITE, RT.TOPIC, "t")

    def test_allow_everyone_if_no_acl_found(self) -> None:
        """With the switch on a resource without ACLs is open; one with ACLs is not."""
        auth = Authorizer(enabled=True, allow_everyone_if_no_acl_found=True,
                          acls=[acl(BOB, RT.TOPIC, "orders", Op.READ)])
        assert auth.authorize(ALICE, Op.WRITE, RT.TOPIC, "free")
        assert not auth.authorize(ALICE, Op.READ, RT.TOPIC, "orders")

    def test_changes_drop_cached_decisions(self) -> None:
        """Adding and removing a rule changes the next decision and bumps the version."""
        auth = Authorizer(enabled=True)
        assert not auth.authorize(ALICE, Op.READ, RT.TOPIC, "orders")
        version = auth.version
        assert auth.add([acl(ALICE, RT.TOPIC, "orders", Op.READ)])
        assert auth.version > version
        assert auth.authorize(ALICE, Op.READ, RT.TOPIC, "orders")
        assert auth.add([acl(ALICE, RT.TOPIC, "orders", Op.READ)]) == []  # already there
        gone = auth.remove(AclFilter(principal=ALICE, operation=Op.READ))
        assert len(gone) == 1
        assert not auth.authorize(ALICE, Op.READ, RT.TOPIC, "orders")


class BindingTests:
    @pytest.mark.parametrize(("args", "fragment"), [
        (("alice", RT.TOPIC, "t", LIT, Op.READ, ALLOW), "principal"),
        ((ALICE, RT.GROUP, "g", LIT, Op.WRITE, ALLOW), "does not apply"),
        ((ALICE, RT.CLUSTER, "other", LIT, Op.CLUSTER_ACTION, ALLOW), "cluster resource"),
        ((ALICE, RT.TOPIC, "*", PRE, Op.READ, ALLOW), "Literal"),
        ((ALICE, RT.TOPIC, "bad name", LIT, Op.READ, ALLOW), "not a valid name"),
    ])
    def test_invalid_bindings_are_refused(self, args: tuple, fragment: str) -> None:
        """A rule that could never match as meant is refused with a reason."""
        with pytest.raises(InvalidAcl, match=fragment):
            AclBinding(*args)

    def test_json_round_trip(self) -> None:
        """A binding survives its stored form, and names are read case-insensitively."""
        one = acl(ALICE, RT.TOPIC, "team-a.", Op.DESCRIBE_CONFIGS, DENY, PRE)
        assert AclBinding.from_json(one.to_json()) == one
        raw = {"principal": ALICE, "resource_type": "topic", "name": "t",
               "operation": "cluster_action"}
        with pytest.raises(InvalidAcl):
            AclBinding.from_json(raw)  # ClusterAction is not a topic operation
        raw["operation"] = "READ"
        assert AclBinding.from_json(raw).operation is Op.READ


def _brute_force(acls: list[AclBinding], principal: str, op: Op, rt: RT, name: str) -> bool:
    """Kafka's rule without an index: every ACL is looked at."""
    def matches(a: AclBinding) -> bool:
        if a.resource_type is not rt:
            return False
        if a.pattern_type is PRE:
            return name.startswith(a.name)
        return a.name in (name, "*")

    found = [a for a in acls if matches(a)]
    if not found:
        return False
    mine = [a for a in found if a.principal in (principal, "User:*")]
    if any(a.permission is DENY and a.operation in (op, Op.ALL) for a in mine):
        return False
    implied = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
               Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}}.get(op, {op})
    return any(a.permission is ALLOW and (a.operation is Op.ALL or a.operation in implied)
               for a in mine)


_NAMES = ["a", "ab", "abc", "b", "team-a.", "team-a.x", "*"]
_TOPIC_OPS = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.ALL,
              Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]


class IndexPropertyTests:
    def test_the_index_decides_as_a_scan_of_every_acl(self) -> None:
        """For random rule sets (literal, prefixed and wildcard names; two principals and
        User:*; allows and denies), every decision of the indexed, cached authorizer equals
        the one of looking at every ACL, before and after rules are removed."""
        from hypothesis import given, settings
        from hypothesis import strategies as st

        binding = st.builds(
            lambda p, n, prefixed, op, perm: AclBinding(
                p, RT.TOPIC, n, PRE if prefixed and n != "*" else LIT, op, perm),
            st.sampled_from([ALICE, BOB, "User:*"]), st.sampled_from(_NAMES), st.booleans(),
            st.sampled_from(_TOPIC_OPS), st.sampled_from([ALLOW, DENY]))

        @settings(max_examples=150, deadline=None)
        @given(acls=st.lists(binding, max_size=8), drop=st.sampled_from([ALICE, BOB]))
        def check(acls: list[AclBinding], drop: str) -> None:
            auth = Authorizer(enabled=True, acls=acls)
            for current in (acls, [a for a in acls if a.principal != drop]):
                if current is not acls:
                    auth.remove(AclFilter(principal=drop))
                for name in ("a", "abc", "abd", "team-a.x", "team-a.y", "zz"):
                    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS):
                        for who in (ALICE, BOB):
                            assert auth.authorize(who, op, RT.TOPIC, name) is \
                                _brute_force(current, who, op, RT.TOPIC, name), (who, op, name)

        check()
