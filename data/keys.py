"""The key hash: which partition a keyed message goes to, in one place.

Owns: ``fnv1a_32`` (FNV-1a, 32 bits, over the key's bytes) and its two constants. The
broker's produce path (``broker.core``), the Iggy transport's balanced partitioning and
every client that picks partitions itself (``data.spark``, ``data.pipelines``) import it
from here; ``data.spark.batches`` vectorises it over an Arrow column with the same
constants. A message with key ``k`` goes to partition ``fnv1a_32(k) % partitions``.

The hash runs compiled (``data._cspeedups.fnv1a_32``) when ``data.speedups`` says so;
``_fnv1a_32_py`` is its pure-Python twin and the reference.

A neutral module: the broker and its clients both import it. Must not import: anything
of Skerry but ``data.speedups``, Twisted.
"""

from __future__ import annotations

from collections.abc import Callable

from data import speedups

__all__ = ["FNV_OFFSET_BASIS", "FNV_PRIME", "fnv1a_32"]

FNV_OFFSET_BASIS = 0x811C9DC5
"""FNV-1a's 32-bit offset basis (the hash of no bytes)."""
FNV_PRIME = 0x01000193
"""FNV-1a's 32-bit prime."""


def _fnv1a_32_py(data: bytes) -> int:
    """FNV-1a, 32 bits: the key-to-partition hash (the reference broker's), over the bytes
    of a bytes-like object (``TypeError`` for anything else, as the compiled twin)."""
    if data.__class__ is not bytes:
        try:
            data = memoryview(data).cast("B")  # type: ignore[assignment]
        except TypeError:
            raise TypeError(f"a bytes-like object is required, not '{type(data).__name__}'") from None
    value = FNV_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return value


fnv1a_32: Callable[[bytes], int] = (
    speedups.compiled.fnv1a_32 if speedups.compiled is not None else _fnv1a_32_py)
"""FNV-1a, 32 bits: the key-to-partition hash (the reference broker's)."""
