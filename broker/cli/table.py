"""Terminal output of the ``skerry`` tools: aligned tables, byte sizes and JSON documents.

Owns: how a table reads in a terminal (upper-case headers, two spaces between columns,
numbers right-aligned, ``-`` for a missing value) and the JSON layout rules shared by every
``--json`` output (one document, sorted nowhere: keys stay in the order the tool built them).

Must not import: anything of the broker; this is pure formatting.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["render_table", "human_bytes", "to_json"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                 right: Sequence[str] = ("size",)) -> str:
    """Rows under headers, columns two spaces apart; a column whose values are integers
    (or missing), or whose header is in ``right``, is right-aligned. Ends with a newline.

    >>> print(render_table(["topic", "partitions"], [["orders", 3], ["payments", 12]]), end="")
    TOPIC     PARTITIONS
    orders             3
    payments          12
    """
    cells = [[_cell(v) for v in row] for row in rows]
    def is_number(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    right = {h.lower() for h in right}
    numeric = [
        headers[i].lower() in right
        or (all(row[i] is None or is_number(row[i]) for row in rows)
            and any(is_number(row[i]) for row in rows))
        for i in range(len(headers))
    ]
    titles = [h.upper() for h in headers]
    widths = [max([len(titles[i])] + [len(r[i]) for r in cells]) for i in range(len(headers))]
    lines = []
    for row in [titles, *cells]:
        parts = []
        for i, text in enumerate(row):
            last = i == len(row) - 1
            if numeric[i]:
                parts.append(text.rjust(widths[i]))
            else:
                parts.append(text if last else text.ljust(widths[i]))
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines) + "\n"


def human_bytes(size: int | None) -> str | None:
    """``1536`` -> ``1.5 KiB``; bytes below 1 KiB stay exact (``812 B``)."""
    if size is None:
        return None
    if size < 1024:
        return f"{size} B"
    value = size / 1024.0
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024.0:
            return f"{value:.1f} {unit}"
        value /= 1024.0
    return f"{value:.1f} TiB"


def to_json(document: Any) -> str:
    """The ``--json`` form: indented, UTF-8 kept readable, one trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
