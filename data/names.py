"""The name rule: what a topic, group, consumer id or user name may be, in one place.

Owns: ``NAME_CHARS`` (the allowed characters, as a regex character-class body),
``MAX_NAME_CHARS``, ``NAME_PATTERN`` (the regex every layer builds its matcher from: the
V1 codec, its compiled fast path included, the config, the CLI, the cluster and group
files, the store's directory names) and ``is_valid_name`` (the whole rule: 1-249
characters of ``[A-Za-z0-9._-]``, and not ``.`` or ``..``, which are directory names;
docs/protocol.md: Names).

A neutral module: the domain packages (``groups``, ``replication``) and ``broker`` all
import it. Must not import: anything of Skerry, Twisted.
"""

from __future__ import annotations

import re

__all__ = ["NAME_CHARS", "MAX_NAME_CHARS", "NAME_PATTERN", "is_valid_name"]

NAME_CHARS = "A-Za-z0-9._-"
"""The characters of a name, as the body of a regex character class."""
MAX_NAME_CHARS = 249
"""Longest topic, group or consumer id."""
NAME_PATTERN = f"[{NAME_CHARS}]{{1,{MAX_NAME_CHARS}}}"
"""A name's characters and length (``.`` and ``..`` match; ``is_valid_name`` refuses them)."""

_NAME_RE = re.compile(NAME_PATTERN)


def is_valid_name(name: object) -> bool:
    """True for a string of 1-249 characters of ``[A-Za-z0-9._-]`` other than ``.`` and
    ``..``."""
    return (isinstance(name, str) and _NAME_RE.fullmatch(name) is not None
            and name != "." and name != "..")
