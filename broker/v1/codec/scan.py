"""V1's PRODUCE fast path: runs of plain PRODUCE lines scanned in place in the read buffer.

Owns: the one statement of the fast-path rules (``PRODUCE_LINE_RE`` plus what the regex cannot
say, in ``_scan_produce_py``, the pure-Python twin and reference of the compiled
``broker.v1._cscan.scan_produce``), and ``scan_produce``, whichever of the two
``data.speedups`` loaded. Whatever a scan accepts ``Codec.parse_command`` accepts with the
same fields (tests/v1/test_codec_fast.py, tests/v1/test_scan_equivalence.py).

Imports: ``data.names`` (the one topic name pattern) and ``data.speedups``.

Must not import: Twisted, sockets, the store; it does no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeAlias

from data import speedups
from data.names import NAME_PATTERN

# The common PRODUCE shape, validated in one C-level match (see _scan_produce_py):
# printable ASCII only, single spaces, optional acks=. Key: no ',', '|' or ':'; value: no
# ',' or '|'; cid: no '|'. PRODUCE_LINE_RE also matches the line's terminator, so the
# transport can walk a whole read with ``match(buf, pos)`` without slicing lines.
_FAST_CID = rb"([\x21-\x7b\x7d\x7e]+)"
_FAST_TOPIC = b"(" + NAME_PATTERN.encode() + b")"
_FAST_KEY = rb"([\x21-\x2b\x2d-\x39\x3b-\x7b\x7d\x7e]{0,255})"
_FAST_VALUE = rb"([\x21-\x2b\x2d-\x7b\x7d\x7e]*)"
_FAST_BODY = (rb"V1\|" + _FAST_CID + rb"\|PRODUCE\|" + _FAST_TOPIC + rb" " + _FAST_KEY + rb":"
              + _FAST_VALUE + rb"(?: acks=(0|1|all))?\r?")
PRODUCE_LINE_RE = re.compile(_FAST_BODY + rb"\n")
_match_produce_line = PRODUCE_LINE_RE.match
FAST_ACKS = {None: "1", b"0": "0", b"1": "1", b"all": "all"}


ProduceRun: TypeAlias = "list[tuple[bytes, bytes, bytes, bytes, str, int]]"
"""``(cid, topic, key, value, acks, start)`` of each plain PRODUCE line a scan took."""


def _scan_produce_py(buffer: bytes, pos: int, most: int, max_line: int,
                     max_value: int) -> tuple[ProduceRun, int]:
    """The PRODUCE fast path over a read: at most ``most`` plain PRODUCE lines from ``pos``
    (``PRODUCE_LINE_RE``, then the rules the regex cannot say, and at most ``max_line``
    bytes each with the terminator), as ``(cid, topic, key, value, acks,
    start)`` with acks ``"0"``, ``"1"`` or ``"all"``; and the position after the last one.
    Stops at the first line of another shape and at the end of ``buffer``.

    The pure-Python twin (the reference) of ``broker.v1._cscan.scan_produce``, which
    ``scan_produce`` is when ``data.speedups`` loads it."""
    run: ProduceRun = []
    append = run.append
    size = len(buffer)
    for _ in range(most):
        match = _match_produce_line(buffer, pos)
        if match is None:
            break
        # The rules the regex cannot say: the value's size; topics starting with "__" take
        # the full path (the handlers check reserved names); the names "." and "..".
        if match.end(4) - match.start(4) > max_value or buffer.startswith(b"__", match.start(2)) \
                or (match.end(2) - match.start(2) <= 2 and match.group(2).strip(b".") == b""):
            break
        end = match.end()
        if end - pos > max_line:
            break
        cid, topic, key, value, acks = match.groups()
        append((cid, topic, key, value, FAST_ACKS[acks], pos))
        pos = end
        if pos == size:
            break
    return run, pos


_cscan = speedups.load("broker.v1._cscan")
scan_produce: Callable[[bytes, int, int, int, int], tuple[ProduceRun, int]] = (
    _cscan.scan_produce if _cscan is not None else _scan_produce_py)
