"""Which implementation of the per-message loops runs: the compiled one or the Python twin.

Owns: the one decision, made once at import. ``data._cspeedups`` (C, ``data/_cspeedups.c``,
built by ``pip install`` when a compiler is there: ``setup.py``) is used unless the
environment sets ``SKERRY_NO_EXTENSIONS`` (to anything but ``""`` or ``"0"``) or it cannot
be imported (not built, or the xxhash symbol it needs is missing). The pure-Python twins
are the reference and live beside their callers: ``data.keys._fnv1a_32_py``,
``data.writer._build_records_py``, ``data.reader._verify_run_py``,
``data.format._consume_items_py``; each of those modules binds its public name to the
compiled function when ``compiled`` is set. ``tests/data/test_speedups_equivalence.py``
holds both to the same bytes and the same errors.

Must not import: Twisted, anything of Skerry (the data modules import this one).
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["ENV", "IMPLEMENTATION", "REASON", "compiled", "describe"]

ENV = "SKERRY_NO_EXTENSIONS"
"""Set to ``1`` to force the pure-Python twin (read once, when ``data`` is first imported)."""

compiled: ModuleType | None = None
REASON = "compiled extension data._cspeedups"
if os.environ.get(ENV, "") not in ("", "0"):
    REASON = f"{ENV} is set"
else:
    try:
        from data import _cspeedups as compiled  # type: ignore[attr-defined,no-redef]
    except ImportError as exc:
        REASON = f"no compiled extension ({exc})"

IMPLEMENTATION = "compiled" if compiled is not None else "python"
"""``"compiled"`` or ``"python"``: what ``skerry serve`` logs and ``/metrics`` exposes."""


def describe() -> str:
    """One line for the log: which implementation runs and why."""
    if compiled is not None:
        return "per-message loops: compiled (data._cspeedups)"
    return f"per-message loops: pure Python ({REASON})"
