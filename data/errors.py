"""Errors of the store, in the store's own words.

Owns: the exceptions ``data`` raises for refusals a caller can act on. They carry no wire
code: each transport (through the broker core) maps them onto its own errors.
``StorageError`` (an I/O failure) still comes from ``broker.errors`` for now.

Must not import: Twisted, anything of ``broker``.
"""

from __future__ import annotations

__all__ = ["TopicQuarantined"]


class TopicQuarantined(Exception):
    """A topic cannot be created: a quarantined topic of the same name (``~bad-<topic>``,
    moved aside because its ``topic.json`` could not be read) is waiting for the operator.
    Creating a new, empty topic there would collide with the documented repair (fix
    ``topic.json`` and rename the folder back)."""

    def __init__(self, topic: str, path: str) -> None:
        super().__init__(f"topic {topic} is quarantined at {path}")
        self.topic = topic
        self.path = path
