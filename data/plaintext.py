"""The plain-text rule of the V1 protocol for message keys and values, in one place.

Owns: ``MAX_KEY_BYTES``, ``BAD_VALUE_RE`` / ``BAD_KEY_RE`` (the characters a plain value or
key may not hold) and ``is_plain_value`` / ``is_plain_key`` (may these bytes travel
unencoded in a V1 line, or must they go as ``enc=b64``; docs/protocol.md: Names, numbers,
keys and values). The broker's V1 codec (``broker.v1.codec.commands``) and the Python client
(``broker.client.codec``) both import it, so the two sides can never disagree.

A neutral module like ``data.names``. Must not import: anything of Skerry, Twisted.
"""

from __future__ import annotations

import re

__all__ = ["BAD_KEY_RE", "BAD_VALUE_RE", "MAX_KEY_BYTES", "is_plain_key", "is_plain_value"]

MAX_KEY_BYTES = 255
"""Longest message key, in UTF-8 bytes."""

# Python's str ``\s`` is exactly ``str.isspace`` (both use Py_UNICODE_ISSPACE); a test pins it.
BAD_VALUE_RE = re.compile(r"[\s,|]")
"""A character a plain (unencoded) value may not hold."""
BAD_KEY_RE = re.compile(r"[\s,|:]")
"""A character a plain key may not hold."""


def is_plain_value(value: bytes) -> bool:
    """True when ``value`` may travel unencoded: UTF-8 without whitespace, '|' or ','."""
    try:
        text = value.decode()
    except UnicodeDecodeError:
        return False
    if text.isprintable():  # the only printable whitespace is the space
        return " " not in text and "," not in text and "|" not in text
    return BAD_VALUE_RE.search(text) is None


def is_plain_key(key: bytes) -> bool:
    """True when ``key`` may travel unencoded: <= 255 bytes of UTF-8 without whitespace,
    '|', ',' or ':'."""
    if len(key) > MAX_KEY_BYTES:
        return False
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return False
    return BAD_KEY_RE.search(text) is None
