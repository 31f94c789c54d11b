"""``skerry acls add|remove|list``: who may do what, on a running broker (docs/security.md).

Owns: the V1 requests each subcommand sends (``ADMIN_ACL_ADD``, ``ADMIN_ACL_REMOVE``,
``ADMIN_ACL_LIST``), the documents built from the answers and the table.

Must not import: Twisted or the broker's server side; V1 through ``broker.client.aio``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from broker.cli.table import render_table
from broker.client.aio import Connection

__all__ = ["AclSpec", "add_acls", "remove_acls", "list_acls", "render_acls", "render_change"]

_FIELDS = ("principal", "resource_type", "pattern", "name", "operation", "permission")


@dataclass(frozen=True)
class AclSpec:
    """What the command line named: principal (``User:alice``; a bare name gets ``User:``),
    resource type, name, pattern, operations and permission; None fields match anything
    (remove and list)."""

    principal: str | None = None
    resource_type: str | None = None
    name: str | None = None
    pattern: str | None = None
    operations: tuple[str, ...] = ()
    permission: str | None = None

    def filter_args(self, operation: str | None) -> str:
        pairs = (("principal", _principal(self.principal)), ("type", self.resource_type),
                 ("name", self.name), ("pattern", self.pattern), ("operation", operation),
                 ("permission", self.permission))
        return " ".join(f"{k}={v}" for k, v in pairs if v is not None)


def _principal(text: str | None) -> str | None:
    if text is None or ":" in text:
        return text
    return f"User:{text}"


def _document(entry: str) -> dict[str, str]:
    return dict(zip(_FIELDS, entry.split(",", 5), strict=True))


async def add_acls(conn: Connection, spec: AclSpec) -> dict[str, Any]:
    """One ADMIN_ACL_ADD per operation."""
    added = 0
    for operation in spec.operations:
        args = f"{_principal(spec.principal)} {spec.resource_type} {spec.name} {operation}"
        if spec.pattern:
            args += f" pattern={spec.pattern}"
        if spec.permission:
            args += f" permission={spec.permission}"
        added += (await conn.request("ADMIN_ACL_ADD", args)).number("added")
    return {"added": added}


async def remove_acls(conn: Connection, spec: AclSpec) -> dict[str, Any]:
    """One ADMIN_ACL_REMOVE per operation (or one for every operation)."""
    removed: list[dict[str, str]] = []
    for operation in spec.operations or (None,):
        reply = await conn.request("ADMIN_ACL_REMOVE", spec.filter_args(operation))
        removed.extend(_document(e) for e in reply.items("acls"))
    return {"removed": len(removed), "acls": removed}


async def list_acls(conn: Connection, spec: AclSpec) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for operation in spec.operations or (None,):
        reply = await conn.request("ADMIN_ACL_LIST", spec.filter_args(operation))
        found.extend(_document(e) for e in reply.items("acls"))
    return found


def render_acls(acls: Sequence[dict[str, str]]) -> str:
    if not acls:
        return "no ACLs\n"
    return render_table(["PRINCIPAL", "TYPE", "PATTERN", "NAME", "OPERATION", "PERMISSION"],
                        [[a[f] for f in _FIELDS] for a in acls])


def render_change(result: dict[str, Any]) -> str:
    if "added" in result:
        return f"added {result['added']} ACL{'s' if result['added'] != 1 else ''}\n"
    text = f"removed {result['removed']} ACL{'s' if result['removed'] != 1 else ''}\n"
    return text + (render_acls(result["acls"]) if result["acls"] else "")
