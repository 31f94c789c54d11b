"""Forwarding V1 group commands to the group's coordinator in a cluster: the command
written back as the line a client would send, and the coordinator's answer relayed with the
client's correlation id, byte for byte what the coordinator would have answered it.

Owns: ``GROUP_COMMANDS`` (the commands that belong to one group id and are forwarded),
``FORWARD_CID_PREFIX`` (the correlation ids of forwarded requests: a broker never forwards
a request carrying one again, so two brokers that disagree for a moment about the leader
cannot bounce a request between them), ``command_line`` and ``relay``.

Must not import: Twisted, the services.
"""

from __future__ import annotations

import base64
from typing import Any

from broker.v1.codec import commands as c

__all__ = ["GROUP_COMMANDS", "FORWARD_CID_PREFIX", "command_line", "relay"]

FORWARD_CID_PREFIX = "fwd-"

GROUP_COMMANDS: tuple[type, ...] = (
    c.Join, c.Sync, c.Heartbeat, c.Leave, c.Commit, c.Offset, c.DescribeGroup,
    c.AdminDeleteGroup, c.AdminResetOffsets, c.AdminCommit, c.GroupHeartbeat,
)


def _options(**options: Any) -> str:
    return "".join(f" {name}={value}" for name, value in options.items() if value is not None)


def command_line(cmd: Any, cid: str) -> bytes:
    """The request line (with its newline) that parses back to ``cmd`` with ``cid``."""
    kind = type(cmd)
    if kind is c.Join:
        args = f"{cmd.group} {cmd.topic} {cmd.member_id}" + _options(
            assignor=cmd.assignor, session_timeout_ms=cmd.session_timeout_ms)
    elif kind in (c.Sync, c.Heartbeat, c.Leave):
        args = f"{cmd.group} {cmd.topic} {cmd.member_id} {cmd.generation}"
    elif kind is c.Commit:
        args = (f"{cmd.group} {cmd.topic} {cmd.member_id} {cmd.generation} {cmd.partition} "
                f"{cmd.offset}")
    elif kind is c.Offset:
        args = f"{cmd.group} {cmd.topic} {cmd.partition}"
    elif kind in (c.DescribeGroup, c.AdminDeleteGroup):
        args = f"{cmd.group} {cmd.topic}"
    elif kind is c.AdminResetOffsets:
        args = f"{cmd.group} {cmd.topic} {cmd.target}" + _options(partition=cmd.partition)
    elif kind is c.AdminCommit:
        args = f"{cmd.group} {cmd.topic} {cmd.partition} {cmd.offset}"
    elif kind is c.GroupHeartbeat:
        args = _group_heartbeat_args(cmd)
    elif kind is c.ListGroups:
        args = ""
    else:
        raise TypeError(f"{kind.__name__} is not forwarded")
    return f"V1|{cid}|{cmd.name}|{args}\n".encode()


_EPOCH_WORDS = {-1: "leave", -2: "leave_static"}


def _group_heartbeat_args(cmd: Any) -> str:
    # Every option the client sent, as it parsed: the regex always base64 (any pattern
    # survives the trip), absent options stay absent ("unchanged" to the coordinator).
    epoch = _EPOCH_WORDS.get(cmd.member_epoch, str(cmd.member_epoch))
    options: dict[str, Any] = {
        "topics": None if cmd.topics is None else ",".join(cmd.topics),
        "regex": None if cmd.regex is None
        else base64.b64encode(cmd.regex.encode("utf-8")).decode("ascii"),
        "enc": None if cmd.regex is None else "b64",
        "assignor": cmd.assignor, "rebalance_timeout_ms": cmd.rebalance_timeout_ms,
        "instance": cmd.instance,
        "owned": None if cmd.owned is None else ",".join(f"{t}:{p}" for t, p in cmd.owned),
    }
    return f"{cmd.group} {cmd.member_id} {epoch}" + _options(**options)


def relay(reply: Any, cid: str) -> bytes:
    """The coordinator's reply (a ``broker.client.codec.Reply``) as the line for the
    client that sent ``cid``."""
    if reply.ok:
        return f"V1|{cid}|OK|{reply.payload}\n".encode() if reply.payload \
            else f"V1|{cid}|OK\n".encode()
    return f"V1|{cid}|ERR|{reply.code}|{reply.payload}\n".encode()
