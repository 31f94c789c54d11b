"""Which implementation of the per-message loops runs: the compiled one or the Python twin.

Owns: the one decision, made once per compiled module at import (``load``). A compiled
module (C: ``data/_cspeedups.c``, ``broker/v1/_cscan.c``, ``broker/kafka/_cfetch.c``;
built by ``pip install`` when a compiler is there, ``setup.py``) is used unless the environment sets
``SKERRY_NO_EXTENSIONS`` (to anything but ``""`` or ``"0"``) or it cannot be imported (not
built, or the xxhash symbol it needs is missing). The pure-Python twins are the reference
and live beside their callers: ``data.keys._fnv1a_32_py``, ``data.writer._build_records_py``,
``data.reader._verify_run_py``, ``data.reader._decode_run_py``,
``data.writer._stamp_framed_py``, ``data.writer._scan_stamped_py``,
``data.format._consume_items_py``,
``broker.v1.codec.replies._fill_produce_ok_py``,
``broker.v1.codec.scan._scan_produce_py``, ``broker.v1.codec.parse._decode_batch_py``,
``broker.kafka.mapping._message_set_py``, ``data.spark.records._record_heads_py``; each of
those modules binds its public name to the compiled function when ``load`` gives the
module. ``tests/data/test_speedups_equivalence.py``, ``tests/v1/test_scan_equivalence.py``
and ``tests/kafka/test_fetch_equivalence.py`` hold both to the same bytes and errors.

Must not import: Twisted, anything of Skerry (the data modules import this one).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["ENV", "compiled", "describe", "implementation", "load", "status"]

ENV = "SKERRY_NO_EXTENSIONS"
"""Set to ``1`` to force the pure-Python twins (read when each compiled module is loaded,
i.e. when Skerry is first imported)."""

status: dict[str, str] = {}
"""Each compiled module asked for: ``"compiled"`` or why the Python twin runs instead."""


def load(name: str) -> ModuleType | None:
    """The compiled module ``name`` (e.g. ``"data._cspeedups"``), or None when the Python
    twin must run: ``SKERRY_NO_EXTENSIONS`` is set, or the module cannot be imported."""
    if os.environ.get(ENV, "") not in ("", "0"):
        status[name] = f"{ENV} is set"
        return None
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        status[name] = f"not built ({exc})"
        return None
    status[name] = "compiled"
    return module


compiled = load("data._cspeedups")
"""The data layer's compiled loops (``data/_cspeedups.c``), or None."""


def implementation() -> str:
    """``"compiled"`` when every compiled module loaded so far runs, ``"python"`` when
    none does, ``"mixed"`` otherwise: what ``skerry serve`` logs and ``/metrics`` exposes."""
    states = {state == "compiled" for state in status.values()}
    if states == {True}:
        return "compiled"
    if states == {False} or not states:
        return "python"
    return "mixed"


def describe() -> str:
    """One line for the log: which implementation runs and, for a twin, why."""
    kind = implementation()
    if kind == "compiled":
        return f"per-message loops: compiled ({', '.join(sorted(status))})"
    reasons = "; ".join(f"{name}: {state}" for name, state in sorted(status.items())
                        if state != "compiled")
    return f"per-message loops: {'pure Python' if kind == 'python' else 'partly compiled'} ({reasons})"
