"""What each V1 command needs: the operation and resource the core's access gate checks.

Owns: ``NEEDS`` (command class -> the checks it needs, each a tuple of alternatives, any
one of which allows), ``check`` (run them for one parsed command), and the names of the
operations for docs/security.md's table (``rows``). Commands not in ``NEEDS`` need nothing
beyond authentication (``PING``, ``AUTH``); ``METADATA`` and ``LIST_GROUPS`` leave out what
the user may not Describe instead of refusing.

Must not import: Twisted, sockets, the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from access import Operation, ResourceType
from access.model import CLUSTER_NAME
from broker.v1 import codec as c

__all__ = ["NEEDS", "check", "rows"]

Op = Operation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

Need = tuple[tuple[Operation, ResourceType, str | None], ...]
"""Alternatives: ``(operation, resource type, the command's field naming the resource)``;
the field is None for the cluster resource."""


def _one(op: Operation, rt: ResourceType, field: str | None) -> Need:
    return ((op, rt, field),)


_CLUSTER_ACTION = (_one(Op.CLUSTER_ACTION, CLUSTER, None),)

NEEDS: dict[type, tuple[Need, ...]] = {
    c.Produce: (_one(Op.WRITE, TOPIC, "topic"),),  # + Create when it would create the topic
    c.ProduceBatch: (_one(Op.WRITE, TOPIC, "topic"),),
    c.Consume: (_one(Op.READ, TOPIC, "topic"),),
    c.Fetch: (_one(Op.READ, TOPIC, "topic"),),
    c.Join: (_one(Op.READ, GROUP, "group"), _one(Op.READ, TOPIC, "topic")),
    c.Sync: (_one(Op.READ, GROUP, "group"),),
    c.Heartbeat: (_one(Op.READ, GROUP, "group"),),
    c.Leave: (_one(Op.READ, GROUP, "group"),),
    c.GroupHeartbeat: (_one(Op.READ, GROUP, "group"),),  # Kafka's ConsumerGroupHeartbeat
    c.Commit: (_one(Op.READ, GROUP, "group"), _one(Op.READ, TOPIC, "topic")),
    c.Offset: (_one(Op.DESCRIBE, GROUP, "group"), _one(Op.DESCRIBE, TOPIC, "topic")),
    c.Offsets: (_one(Op.DESCRIBE, TOPIC, "topic"),),
    c.DescribeGroup: (_one(Op.DESCRIBE, GROUP, "group"), _one(Op.DESCRIBE, TOPIC, "topic")),
    c.AdminDeleteGroup: (_one(Op.DELETE, GROUP, "group"),),
    c.AdminResetOffsets: (_one(Op.READ, GROUP, "group"), _one(Op.READ, TOPIC, "topic")),
    c.AdminCommit: (_one(Op.READ, GROUP, "group"), _one(Op.READ, TOPIC, "topic")),
    c.AdminCreateTopic: (((Op.CREATE, CLUSTER, None), (Op.CREATE, TOPIC, "topic")),),
    c.AdminDeleteTopic: (_one(Op.DELETE, TOPIC, "topic"),),
    c.AdminAddPartitions: (_one(Op.ALTER, TOPIC, "topic"),),
    c.AdminAlterTopic: (_one(Op.ALTER_CONFIGS, TOPIC, "topic"),),
    c.ReplicaFetch: _CLUSTER_ACTION,
    c.ReplicaPull: _CLUSTER_ACTION,
    c.ReplicaEpoch: _CLUSTER_ACTION,
    c.ReplicaStatus: _CLUSTER_ACTION,
    c.SetPartitionRole: _CLUSTER_ACTION,
    c.AdminRegisterBroker: _CLUSTER_ACTION,
    c.AdminBrokerHeartbeat: _CLUSTER_ACTION,
    c.AdminSetPartitionLeader: _CLUSTER_ACTION,
    c.AdminGetMetadata: (_one(Op.DESCRIBE, CLUSTER, None),),
    c.AdminAclAdd: (_one(Op.ALTER, CLUSTER, None),),
    c.AdminAclRemove: (_one(Op.ALTER, CLUSTER, None),),
    c.AdminAclList: (_one(Op.DESCRIBE, CLUSTER, None),),
}
"""Kafka's choices where Kafka has the request: Produce needs Write on the topic, Fetch
Read; JoinGroup/SyncGroup/Heartbeat/LeaveGroup and ConsumerGroupHeartbeat (V1 GROUP_HEARTBEAT) Read on the group (V1's JOIN also names
the topic whose partitions it hands out: Read on it); OffsetCommit Read on group and
topic; OffsetFetch Describe on both; ListOffsets Describe on the topic; DeleteGroups
Delete on the group; CreateTopics Create on the cluster or the topic; DeleteTopics Delete,
CreatePartitions Alter, IncrementalAlterConfigs AlterConfigs on the topic; the
inter-broker requests ClusterAction on the cluster."""

FILTERED = {c.Metadata: "Describe Topic (the list leaves out the others; METADATA of one "
                        "topic needs it)",
            c.ListGroups: "Describe Group (unlisted groups are left out)"}
"""Commands that filter instead of refusing."""

NOTES = {c.Produce: "; Create Cluster or Create Topic too when it creates the topic"}
"""What a command needs beyond ``NEEDS``, checked by its handler."""

NONE = (c.Ping, c.Auth)
"""Commands that need no ACL."""


def check(cmd: Any, gate: Callable[[Any, tuple[tuple[Any, ...], ...]], None],
          requester: Any) -> None:
    """Run ``cmd``'s checks through ``gate`` (``BrokerCore.access.check_any``)."""
    needs = NEEDS.get(type(cmd))
    if needs is None:
        if type(cmd) is c.Metadata and cmd.topic is not None:
            gate(requester, ((Op.DESCRIBE, TOPIC, cmd.topic),))
        return
    for alternatives in needs:
        gate(requester, tuple((op, rt, CLUSTER_NAME if field is None else getattr(cmd, field))
                              for op, rt, field in alternatives))


def rows() -> list[tuple[str, str]]:
    """``(command, what it needs)`` for every V1 command, for docs/security.md."""
    out: list[tuple[str, str]] = []
    for cls in NONE:
        out.append((cls.name, "nothing (authentication only)"))
    for cls, needs in NEEDS.items():
        parts = []
        for alternatives in needs:
            parts.append(" or ".join(f"{op.value} {rt.value}" for op, rt, _ in alternatives))
        out.append((cls.name, ", ".join(parts) + NOTES.get(cls, "")))
    for cls, text in FILTERED.items():
        out.append((cls.name, text))
    return sorted(out)
