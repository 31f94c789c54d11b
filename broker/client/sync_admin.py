"""The blocking client's admin commands: create, delete, grow and alter a topic; describe, list and delete groups; reset and set committed offsets.

Must not import: the broker's server side, Twisted.
"""

from __future__ import annotations

from broker.client.codec import (
    Reply,
    check_name,
    check_number,
)


class AdminCalls:
    """Part of ``broker.client.sync.Client``: topic and group administration."""

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1, *,
                     min_isr: int | None = None, retention_ms: int | None = None,
                     retention_bytes: int | None = None) -> None:
        args = (f"{check_name('topic', topic)} {check_number('partitions', partitions)} "
                f"{check_number('replication_factor', replication_factor)}")
        for name, value in (("min_isr", min_isr), ("retention_ms", retention_ms),
                            ("retention_bytes", retention_bytes)):
            if value is not None:
                args += f" {name}={value}"
        self.call("ADMIN_CREATE_TOPIC", args)

    def delete_topic(self, topic: str) -> None:
        self.call("ADMIN_DELETE_TOPIC", check_name("topic", topic))

    def add_partitions(self, topic: str, total: int) -> None:
        self.call("ADMIN_ADD_PARTITIONS",
                  f"{check_name('topic', topic)} {check_number('total', total)}")

    def alter_topic(self, topic: str, *, retention_ms: int | str | None = None,
                    retention_bytes: int | str | None = None) -> Reply:
        """Change retention (``"none"`` removes a limit); the answer holds the new values."""
        args = check_name("topic", topic)
        if retention_ms is not None:
            args += f" retention_ms={retention_ms}"
        if retention_bytes is not None:
            args += f" retention_bytes={retention_bytes}"
        return self.call("ADMIN_ALTER_TOPIC", args)

    def describe_group(self, group: str, topic: str) -> Reply:
        return self.call("DESCRIBE_GROUP",
                         f"{check_name('group', group)} {check_name('topic', topic)}")

    def list_groups(self) -> list[str]:
        """``<group>:<topic>`` of every group."""
        return self.call("LIST_GROUPS").items("groups")

    def delete_group(self, group: str, topic: str) -> None:
        self.call("ADMIN_DELETE_GROUP",
                  f"{check_name('group', group)} {check_name('topic', topic)}")

    def reset_offsets(self, group: str, topic: str, to: str | int,
                      partition: int | None = None) -> dict[int, int]:
        """Set committed offsets to ``earliest``, ``latest`` or an offset; the new ones."""
        check_name("group", group)
        check_name("topic", topic)
        args = f"{group} {topic} {to}" + (f" partition={partition}" if partition is not None
                                          else "")
        out = {}
        for item in self.call("ADMIN_RESET_OFFSETS", args).items("offsets"):
            p, _, o = item.partition(":")
            out[int(p)] = int(o)
        return out

    def admin_commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.call("ADMIN_COMMIT", f"{check_name('group', group)} {check_name('topic', topic)} "
                                  f"{check_number('partition', partition)} "
                                  f"{check_number('offset', offset)}")
