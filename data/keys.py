"""The key hash: which partition a keyed message goes to, in one place.

Owns: ``fnv1a_32`` (FNV-1a, 32 bits, over the key's bytes) and its two constants. The
broker's produce path (``broker.core``), the Iggy transport's balanced partitioning and
every client that picks partitions itself (``data.spark``, ``data.pipelines``) import it
from here; ``data.spark.batches`` vectorises it over an Arrow column with the same
constants. A message with key ``k`` goes to partition ``fnv1a_32(k) % partitions``.

A neutral module: the broker and its clients both import it. Must not import: anything
of Skerry, Twisted.
"""

from __future__ import annotations

__all__ = ["FNV_OFFSET_BASIS", "FNV_PRIME", "fnv1a_32"]

FNV_OFFSET_BASIS = 0x811C9DC5
"""FNV-1a's 32-bit offset basis (the hash of no bytes)."""
FNV_PRIME = 0x01000193
"""FNV-1a's 32-bit prime."""


def fnv1a_32(data: bytes) -> int:
    """FNV-1a, 32 bits: the key-to-partition hash (the reference broker's)."""
    value = FNV_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return value
