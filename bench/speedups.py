"""Each compiled per-message loop against its pure-Python twin, in process, no I/O.

Owns: timing every function of ``data._cspeedups`` and ``broker.v1._cscan`` (and the Kafka
fetch loops of ``broker.kafka._cfetch`` on a compacted topic's run) and its twin on
the benchmark's shapes (batches of 1,000 messages of 100 bytes, keys of 5-8 bytes, the V1
PRODUCE lines the load generator sends): CPU time per message, best of five rounds. It is
how docs/performance.md's "Compiled loops" table is made:
``python -m bench.speedups`` (prints a Markdown table; skips the compiled column when the
extensions are not built).

Must not import: Twisted.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from broker.v1 import codec
from broker.v1.codec import replies
from data import format as fmt
from data import keys, reader, writer

N = 1000


def _per_message(function: Callable[..., Any], args: tuple[Any, ...], per_call: int,
                 rounds: int = 5, seconds: float = 0.2) -> float:
    """Best CPU time per message over ``rounds`` rounds of about ``seconds`` each, in ns."""
    calls = 1
    start = time.process_time()
    function(*args)
    once = max(time.process_time() - start, 1e-6)
    calls = max(1, int(seconds / once))
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            function(*args)
        best = min(best, (time.process_time() - start) / calls)
    return best / per_call * 1e9


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def main() -> int:
    data_c = _module("data._cspeedups")
    scan_c = _module("broker.v1._cscan")
    payloads = [os.urandom(50).hex().encode() for _ in range(N)]
    headers = [fmt.key_header(b"user%d" % (i % 100)) for i in range(N)]
    idb = writer.random_ids(N)
    raw, ends = writer._build_records_py(idb, payloads, headers, None, 0, 1, 0)
    framed, framed_ends = writer._build_records_py(idb, payloads, None, None, 0, 0, 0)
    framed_ends = framed_ends[1:]
    lines = b"".join(b"V1|%d|PRODUCE|bench user%d:%s\n" % (i, i % 100, p) for i, p in enumerate(payloads))

    def scan_all(scan: Callable[..., Any]) -> Callable[[], None]:
        def run() -> None:
            pos = 0
            while pos < len(lines):
                _, pos = scan(lines, pos, 32, 1 << 20, 1 << 20)
        return run

    slots = [[None, b"%d" % i] for i in range(N)]
    # A compacted topic's run: one record in ten a tombstone (an empty stored value), each
    # with a key; a fetch sends the tombstones as null values (``empty_is_null``).
    compacted, compacted_ends = writer._build_records_py(
        idb, [b"" if i % 10 == 0 else p for i, p in enumerate(payloads)], headers, None, 0, 1, 0)
    compacted_ends = compacted_ends[1:]
    kafka_c = _module("broker.kafka._cfetch")
    from broker.kafka import mapping
    cases: list[tuple[str, Any, Any, tuple[Any, ...], int]] = [
        ("FNV-1a of an 8-byte key", keys._fnv1a_32_py, data_c and data_c.fnv1a_32, (b"user1234",), 1),
        ("build a batch of records (header, XXH3, key header)", writer._build_records_py,
         data_c and data_c.build_records, (idb, payloads, headers, None, 0, 1, 0), N),
        ("verify a run of records (checks, XXH3)", reader._verify_run_py,
         data_c and data_c.verify_run, (raw, ends, 0, 1 << 30, True), N),
        ("decode a run into Record tuples (checks, XXH3)", lambda *a: reader._decode_run_py(*a[:3], [], *a[3:]),
         data_c and (lambda *a: data_c.decode_run(*a[:3], [], *a[3:], fmt.Record)),
         (raw, ends, 0, 1 << 30, True), N),
        ("stamp an Iggy SendMessages area (ids set)", writer._stamp_framed_py,
         data_c and (lambda *a: data_c.stamp_framed(*a, writer.random_ids)),
         (framed, framed_ends, 0, 1, 0), N),
        ("CONSUME items (cut payloads, format)", fmt._consume_items_py,
         data_c and data_c.consume_items, (raw, ends[1:], 0), N),
        ("scan PRODUCE lines (runs of 32)", scan_all(codec._scan_produce_py),
         scan_c and scan_all(scan_c.scan_produce), (), N),
        ("fill PRODUCE replies", replies._fill_produce_ok_py, scan_c and scan_c.fill_produce_ok,
         (slots, 0, 0, 0), N),
        ("Kafka fetch of a compacted topic: record batches v2, tombstones null",
         mapping._record_batches_py, kafka_c and kafka_c.record_batches,
         (compacted, compacted_ends, 1 << 30, True, False, -1, True), N),
        ("Kafka fetch of a compacted topic: MessageSet v1, tombstones null",
         mapping._message_set_py, kafka_c and kafka_c.message_set,
         (compacted, compacted_ends, 1, 1 << 30, True, True), N),
    ]
    print("| per message (CPU ns, best of 5) | pure-Python twin | compiled | twin / compiled |")
    print("|---|---:|---:|---:|")
    for title, twin, compiled, args, per_call in cases:
        t = _per_message(twin, args, per_call)
        if compiled:
            c = _per_message(compiled, args, per_call)
            print(f"| {title} | {t:,.0f} | {c:,.0f} | {t / c:.1f}x |")
        else:
            print(f"| {title} | {t:,.0f} | not built | |")
    print()
    print("| store ids for a batch (CPU ns an id, best of 5) | 1 id | 50 ids | 1,000 ids |")
    print("|---|---:|---:|---:|")
    for title, draw in (("`random_ids`: ChaCha20 keystream (OpenSSL)", writer.random_ids),
                        ("the same from `os.urandom` (before 2026-11-28)", _urandom_ids)):
        figures = " | ".join(f"{_per_message(draw, (n,), n):,.0f}" for n in (1, 50, N))
        print(f"| {title} | {figures} |")
    return 0


def _urandom_ids(n: int) -> bytes:
    """``writer.random_ids`` as it was: one ``os.urandom`` call, the same bit setting."""
    raw = bytearray(os.urandom(16 * n))
    raw[9::16] = raw[9::16].translate(writer._SET_VERSION)
    raw[7::16] = raw[7::16].translate(writer._SET_VARIANT)
    return bytes(raw)


if __name__ == "__main__":
    sys.exit(main())
