"""The name rule: what a topic, group, consumer id or user name may be, in one place.

Owns: ``NAME_CHARS`` (the allowed characters, as a regex character-class body),
``MAX_NAME_CHARS``, ``NAME_PATTERN`` (the regex every layer builds its matcher from: the
V1 codec, its compiled fast path included, the config, the CLI, the cluster and group
files, the store's directory names) and ``is_valid_name`` (the whole rule: 1-249
characters of ``[A-Za-z0-9._-]``, and not ``.`` or ``..``, which are directory names;
docs/protocol.md: Names), and the reserved name prefixes, each spelled once here:
``INTERNAL_PREFIX`` (the broker's own topics, ``__skerry_groups``), ``IGGY_STORE_PREFIX``
(the Iggy transport's store topics) and ``IGGY_GROUP_PREFIX`` (its consumers' groups). Every
transport, service and tool that treats those names specially imports them from here.

A neutral module: the domain packages (``groups``, ``replication``) and ``broker`` all
import it. Must not import: anything of Skerry, Twisted.
"""

from __future__ import annotations

import re

__all__ = ["NAME_CHARS", "MAX_NAME_CHARS", "NAME_PATTERN", "is_valid_name", "INTERNAL_PREFIX",
           "IGGY_STORE_PREFIX", "IGGY_GROUP_PREFIX"]

NAME_CHARS = "A-Za-z0-9._-"
"""The characters of a name, as the body of a regex character class."""
MAX_NAME_CHARS = 249
"""Longest topic, group or consumer id."""
NAME_PATTERN = f"[{NAME_CHARS}]{{1,{MAX_NAME_CHARS}}}"
"""A name's characters and length (``.`` and ``..`` match; ``is_valid_name`` refuses them)."""

INTERNAL_PREFIX = "__skerry_"
"""Names of the broker's own topics start with this (``__skerry_groups``)."""
IGGY_STORE_PREFIX = "__iggy."
"""Store topics of the Iggy transport's streams other than ``default`` are ``__iggy.<n>``
(reserved: V1 may read them, not write them; Kafka clients do not see them)."""
IGGY_GROUP_PREFIX = "iggy.consumer."
"""The group holding a plain Iggy consumer's offsets is ``iggy.consumer.<id>`` (reserved
for the Iggy transport like its topics)."""

_NAME_RE = re.compile(NAME_PATTERN)


def is_valid_name(name: object) -> bool:
    """True for a string of 1-249 characters of ``[A-Za-z0-9._-]`` other than ``.`` and
    ``..``."""
    return (isinstance(name, str) and _NAME_RE.fullmatch(name) is not None
            and name != "." and name != "..")
