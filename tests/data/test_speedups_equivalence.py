"""The compiled loops (``data._cspeedups``) against their pure-Python twins (hypothesis):
the same bytes and the same errors for the same input, malformed input included.

Skipped where the extension is not built (a machine without a C compiler): the twin alone
runs there, and ``test_speedups_twin.py`` runs the store and codec tests on it everywhere.
"""

from __future__ import annotations

import os
import shutil
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data import format as fmt
from data import idempotence, keys, reader, speedups, writer

try:
    from data import _cspeedups as C  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine
    C = None

pytestmark = pytest.mark.skipif(C is None, reason="data._cspeedups is not built (no C compiler "
                                                  "at install time): only the twin runs here")

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MAX_U64 = (1 << 64) - 1


def outcome(function: Any, *args: Any) -> tuple[Any, ...]:
    """What a call gave: ``("ok", result)`` or ``("error", type, message)``."""
    try:
        result = function(*args)
    except Exception as exc:  # noqa: BLE001 - any exception is part of the contract here
        return ("error", type(exc), str(exc))
    if isinstance(result, reader.RunResult):
        result = (result.count, result.consumed, result.payload, result.over_budget, result.failed)
    return ("ok", result)


def test_the_extension_runs_where_it_was_built() -> None:
    """With the extension built and no SKERRY_NO_EXTENSIONS, the public names are the
    compiled functions (a silently broken selection would only show as a slow broker)."""
    if os.environ.get(speedups.ENV, "") not in ("", "0"):
        pytest.skip(f"{speedups.ENV} is set: the twin runs by request")
    assert speedups.compiled is C
    assert keys.fnv1a_32 is C.fnv1a_32
    assert fmt.consume_items is C.consume_items
    assert speedups.status["data._cspeedups"] == "compiled"


def test_a_machine_with_a_compiler_builds_it() -> None:
    assert C is not None or shutil.which("cc") is None


# --------------------------------------------------------------------------- fnv1a_32

not_bytes = st.one_of(st.text(max_size=5), st.integers(), st.none(), st.lists(st.integers(0, 255), max_size=3))


@SETTINGS
@given(st.one_of(st.binary(max_size=300), st.binary(max_size=30).map(bytearray),
                 st.binary(max_size=30).map(memoryview), not_bytes))
def test_fnv1a_32(data: Any) -> None:
    assert outcome(C.fnv1a_32, data) == outcome(keys._fnv1a_32_py, data)


def test_fnv1a_32_known_values() -> None:
    # FNV-1a 32 test vectors (the empty string is the offset basis).
    for impl in (C.fnv1a_32, keys._fnv1a_32_py):
        assert impl(b"") == 0x811C9DC5
        assert impl(b"a") == 0xE40C292C
        assert impl(b"foobar") == 0xBF9CF968


# --------------------------------------------------------------------------- build_records

u64ish = st.one_of(st.integers(0, MAX_U64), st.integers(-3, 3), st.integers(MAX_U64 - 3, MAX_U64 + 3),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=2), st.booleans())
payload_like = st.one_of(st.binary(max_size=200), st.binary(max_size=20).map(bytearray))
bad_payload = st.one_of(st.text(max_size=3), st.integers(), st.none())


@st.composite
def batches(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(0, 12))
    malformed = draw(st.booleans())
    item = st.one_of(payload_like, bad_payload) if malformed else payload_like
    payloads = draw(st.lists(item, min_size=n, max_size=n))
    headers = draw(st.one_of(st.none(), st.lists(item, min_size=n, max_size=n),
                             st.lists(payload_like, max_size=3)))
    origins = draw(st.one_of(st.none(), st.lists(u64ish if malformed else st.integers(0, MAX_U64),
                                                 min_size=n, max_size=n),
                             st.lists(st.integers(0, 9), max_size=3)))
    idb = draw(st.one_of(st.just(bytes(range(16)) * n), st.binary(max_size=40)))
    first = draw(st.integers(-2, MAX_U64 + 2) if malformed else st.integers(0, 1 << 40))
    timestamp = draw(u64ish if malformed else st.integers(0, MAX_U64))
    start = draw(st.one_of(st.integers(0, 1 << 20), st.integers((1 << 32) - 3000, (1 << 32) + 5)))
    return (idb, payloads, headers, origins, first, timestamp, start)


@SETTINGS
@given(batches())
def test_build_records(batch: tuple[Any, ...]) -> None:
    expected = outcome(writer._build_records_py, *batch)
    assert outcome(C.build_records, *batch) == expected


def test_build_records_names_the_first_bad_record() -> None:
    args = (bytes(48), [b"a", b"b", "c"], None, [1, -5, 3], 0, 7, 0)
    for impl in (C.build_records, writer._build_records_py):
        with pytest.raises(ValueError, match=r"message 1: origin timestamp -5 does not fit in u64"):
            impl(*args)


# --------------------------------------------------------------------------- runs of records


@st.composite
def runs(draw: st.DrawFn) -> tuple[bytes, list[int], int]:
    """A run of valid records as the store holds them: (bytes, ends with ends[0] == 0, first offset)."""
    n = draw(st.integers(1, 8))
    payloads = draw(st.lists(st.binary(max_size=80), min_size=n, max_size=n))
    headers = draw(st.lists(st.sampled_from([b"", fmt.key_header(b"k1"), fmt.key_header(b"user-7")]),
                            min_size=n, max_size=n))
    first = draw(st.integers(0, 1 << 40))
    ids = draw(st.binary(min_size=16 * n, max_size=16 * n))
    data, ends = writer._build_records_py(ids, payloads, headers, None, first, 5, 0)
    return data, ends, first


@st.composite
def damaged(draw: st.DrawFn) -> tuple[bytes, list[int], int]:
    data, ends, first = draw(runs())
    raw = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "ends", "offset", "extend"]))
        if kind == "flip" and raw:
            at = draw(st.integers(0, len(raw) - 1))
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate" and raw:
            del raw[draw(st.integers(0, len(raw) - 1)):]
        elif kind == "ends" and len(ends) > 1:
            at = draw(st.integers(1, len(ends) - 1))
            ends = [*ends[:at], max(0, ends[at] + draw(st.integers(-70, 70))), *ends[at + 1:]]
        elif kind == "offset":
            first = max(0, first + draw(st.integers(-2, 2)))
        elif kind == "extend":
            raw += draw(st.binary(max_size=70))
    return bytes(raw), ends, first


@SETTINGS
@given(st.one_of(runs(), damaged()), st.integers(-1, 400), st.booleans())
def test_verify_run(run: tuple[bytes, list[int], int], budget: int, take_first: bool) -> None:
    data, ends, first = run
    expected = outcome(reader._verify_run_py, data, ends, first, budget, take_first)
    assert outcome(reader.verify_run if speedups.compiled else _c_verify, data, ends, first,
                   budget, take_first) == expected
    assert outcome(_c_verify, data, ends, first, budget, take_first) == expected


@SETTINGS
@given(st.one_of(runs(), damaged()), st.integers(-1, 400), st.booleans())
def test_decode_run(run: tuple[bytes, list[int], int], budget: int, take_first: bool) -> None:
    """The same records (as ``Record`` tuples, ids as u128) and the same ``RunResult``."""
    data, ends, first = run
    out_py: list[fmt.Record] = []
    out_c: list[fmt.Record] = []
    expected = outcome(reader._decode_run_py, data, ends, first, out_py, budget, take_first)
    got = outcome(lambda *a: reader.RunResult(*C.decode_run(*a, fmt.Record)),
                  data, ends, first, out_c, budget, take_first)
    assert got == expected
    assert out_c == out_py
    assert all(type(record) is fmt.Record for record in out_c)


def _c_verify(data: bytes, ends: list[int], first: int, budget: int, take_first: bool) -> reader.RunResult:
    return reader.RunResult(*C.verify_run(data, ends, first, budget, take_first))


@SETTINGS
@given(st.one_of(runs(), damaged()), st.integers(-1, 400), st.booleans())
def test_verify_run_reads_int64_ends_in_place(run: tuple[bytes, list[int], int], budget: int,
                                              take_first: bool) -> None:
    """The ends as an int64 array (numpy's, or ``array('q')``), as ``read_raw(ends_array=True)``
    passes them: the same ``RunResult`` (or error) as the list and as the twin."""
    import numpy as np

    data, ends, first = run
    expected = outcome(reader._verify_run_py, data, ends, first, budget, take_first)
    assert outcome(_c_verify, data, np.array(ends, dtype=np.int64), first, budget,
                   take_first) == expected
    assert outcome(_c_verify, data, array("q", ends), first, budget, take_first) == expected


def test_verify_run_takes_other_integer_buffers_as_sequences() -> None:
    """An ``array('I')`` is not read in place (its items are not 64-bit): it goes the
    sequence way and gives the same answer."""
    data, ends = writer._build_records_py(bytes(48), [b"a", b"bc", b"d"], None, None, 7, 5, 0)
    want = outcome(_c_verify, data, ends, 7, 1000, True)
    assert want[1][0] == 3
    assert outcome(_c_verify, data, array("I", ends), 7, 1000, True) == want
    assert outcome(_c_verify, data, array("q", ends), 7, 1000, True) == want


def test_verify_run_stops_before_a_corrupt_record() -> None:
    data, ends = writer._build_records_py(bytes(48), [b"a", b"b", b"c"], None, None, 10, 5, 0)
    bad = bytearray(data)
    bad[ends[1] + 64] ^= 1  # the payload byte of the second record
    result = _c_verify(bytes(bad), ends, 10, 1000, True)
    assert (result.count, result.consumed, result.failed) == (1, ends[1], True)


@SETTINGS
@given(st.one_of(runs(), damaged()), st.integers(-1, 3))
def test_consume_items(run: tuple[bytes, list[int], int], shift: int) -> None:
    data, ends, first = run
    record_ends = ends[1:]
    first += shift
    assert outcome(C.consume_items, data, record_ends, first) == \
        outcome(fmt._consume_items_py, data, record_ends, first)


def test_consume_items_of_a_valid_run() -> None:
    data, ends = writer._build_records_py(bytes(32), [b"x", b"yz"], None, None, 41, 5, 0)
    for impl in (C.consume_items, fmt._consume_items_py):
        assert impl(data, ends[1:], 41) == b"41:x,42:yz"
        assert impl(data, [], 41) == b""


def test_build_then_verify_round_trip() -> None:
    payloads = [os.urandom(10) for _ in range(50)]
    data, ends = C.build_records(writer.random_ids(50), payloads, None, None, 3, 9, 0)
    assert len(data) == ends[-1]
    assert _c_verify(data, ends, 3, 1 << 30, True).count == 50
    assert reader._verify_run_py(data, ends, 3, 1 << 30, True).count == 50


# --------------------------------------------------------------------------- stamp_framed


@st.composite
def framed(draw: st.DrawFn) -> tuple[bytes, list[int] | None]:
    """Iggy SendMessages areas: records as a client frames them (ids set or 0), maybe damaged."""
    n = draw(st.integers(0, 6))
    payloads = draw(st.lists(st.binary(max_size=40), min_size=n, max_size=n))
    ids = b"".join(draw(st.sampled_from([bytes(16), bytes(range(1, 17))])) for _ in range(n))
    data, ends = writer._build_records_py(ids, payloads, None, None, 0, 0, 0)
    raw = bytearray(data)
    record_ends = ends[1:]
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["flip", "truncate", "ends", "reserved", "extend"]))
        if kind == "flip" and raw:
            at = draw(st.integers(0, len(raw) - 1))
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate" and raw:
            del raw[draw(st.integers(0, len(raw) - 1)):]
        elif kind == "ends" and record_ends:
            at = draw(st.integers(0, len(record_ends) - 1))
            record_ends[at] = max(0, record_ends[at] + draw(st.integers(-70, 70)))
        elif kind == "reserved" and len(raw) > 56:
            raw[56] = 1
        elif kind == "extend":
            raw += draw(st.binary(max_size=70))
    return bytes(raw), draw(st.sampled_from([None, record_ends]))


def _fake_ids(k: int) -> bytes:
    return bytes((i * 7 + 3) % 256 for i in range(16 * k))


@SETTINGS
@given(framed(), st.sampled_from([-1, 0, 5, (1 << 64) - 3, MAX_U64]),
       st.sampled_from([-1, 0, 17, MAX_U64, MAX_U64 + 1]),
       st.sampled_from([0, 100, (1 << 32) - 200]))
def test_stamp_framed(area: tuple[bytes, list[int] | None], first: int, timestamp: int,
                      start: int) -> None:
    messages, ends = area
    original = writer.random_ids
    writer.random_ids = _fake_ids  # both call the module's random_ids: the same "random" ids
    try:
        expected = outcome(writer._stamp_framed_py, messages, ends, first, timestamp, start)
        got = outcome(C.stamp_framed, messages, ends, first, timestamp, start, writer.random_ids)
    finally:
        writer.random_ids = original
    if expected[0] == "ok":
        expected = ("ok", (bytes(expected[1][0]), expected[1][1]))
    if got[0] == "ok":
        got = ("ok", (bytes(got[1][0]), got[1][1]))
    assert got == expected


@SETTINGS
@given(framed(), st.sampled_from([0, 5, MAX_U64]), st.sampled_from([0, 100]),
       st.data())
def test_stamp_framed_with_ids(area: tuple[bytes, list[int] | None], first: int,
                               start: int, data: st.DataObject) -> None:
    """An idempotent producer's ids stamped in the store's one pass give the bytes (or the
    error) of writing them into a copy first (``data.idempotence.stamp_ids``, the route
    before) then stamping, with the C loop and with its pure twin; records that carry an
    id of their own get the given id too."""
    from data.idempotence import batch_ids, stamp_ids

    messages, ends = area
    if ends is None:
        try:
            ends = writer._walk_ends(messages)
        except ValueError:
            return  # the produce path has its ends before it stamps
    ids = batch_ids(7, 1, data.draw(st.integers(0, (1 << 31) - 1)), max(len(ends), 1))
    ids = ids[:len(ends)]
    try:
        before = stamp_ids(messages, [0, *ends[:-1]], ids)
    except (IndexError, ValueError):
        before = None  # cut short: no bytes to compare, only that both refuse it
    for stamp in (writer._stamp_framed_py,
                  lambda *a: C.stamp_framed(*a[:5], a[5] if len(a) > 5 else writer.random_ids)):
        expected = outcome(stamp, before, ends, first, 17, start) if before is not None else None
        got = outcome(writer._stamp_framed_with_ids, stamp, messages, ends, first, 17, start,
                      ids.tobytes())
        if expected is None:
            assert got[0] == "error"
            continue
        if expected[0] == "ok":
            expected = ("ok", (bytes(expected[1][0]), expected[1][1]))
        if got[0] == "ok":
            got = ("ok", (bytes(got[1][0]), got[1][1]))
        assert got == expected


# --------------------------------------------------------------------------- record_heads


@SETTINGS
@given(st.one_of(runs(), damaged()), st.integers(-1, 80), st.integers(-10, 900),
       st.integers(0, 10), st.integers(0, 55))
def test_record_heads(run: tuple[bytes, list[int], int], start: int, end: int, cap: int,
                      spare: int) -> None:
    """The same count and the same column bytes (``spare`` bytes short of a whole row of
    columns are left alone by both), also on damaged runs, past-the-end ``end`` and
    ``start`` values, and a negative ``start`` (ValueError)."""
    from data.spark import records

    data = run[0]
    out_py = bytearray(b"\xee" * (56 * cap + spare))
    out_c = bytearray(out_py)
    expected = outcome(records._record_heads_py, data, start, end, out_py)
    assert outcome(C.record_heads, data, start, end, out_c) == expected
    assert out_c == out_py


def test_walk_records_gives_the_header_fields_of_a_valid_run() -> None:
    from data.spark import records

    data, ends = writer._build_records_py(bytes(48), [b"a", b"bc", b""], [b"", fmt.key_header(b"k"), b""],
                                          None, 41, 7, 0)
    for impl in (C.record_heads, records._record_heads_py):
        original = records.record_heads
        records.record_heads = impl
        try:
            pos, heads = records.walk_records(data + b"\xff" * 70)  # a partial tail is left out
            cut, _ = records.walk_records(data, limit=2)
        finally:
            records.record_heads = original
        assert pos.tolist() == ends[:-1] and cut.tolist() == ends[:2]
        assert heads.offsets.tolist() == [41, 42, 43]
        assert heads.timestamps.tolist() == [7, 7, 7]
        assert heads.payload_lengths.tolist() == [1, 2, 0]
        assert heads.user_headers_lengths.tolist() == [0, len(fmt.key_header(b"k")), 0]
        assert heads.reserved.tolist() == [0, 0, 0]
        assert heads.checksums.tolist() == [int.from_bytes(data[e:e + 8], "little") for e in ends[:-1]]


def test_record_starts_walks_a_long_run_window_by_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk longer than one window of header columns gives the same positions as one
    window, also from a start inside the buffer and before a partial tail."""
    from data.spark import records

    data, ends = writer._build_records_py(bytes(16 * 50), [b"v%d" % i for i in range(50)],
                                          [fmt.key_header(b"k")] * 50, None, 3, 7, 0)
    whole = records.record_starts(data + b"\xff" * 10).tolist()
    monkeypatch.setattr(records, "_WALK_WINDOW", 7)
    assert records.record_starts(data + b"\xff" * 10).tolist() == whole == ends[:-1]
    assert records.record_starts(data, ends[3], ends[49]).tolist() == ends[3:49]
    monkeypatch.setattr(records, "_WALK_WINDOW", 50)  # exactly one full window, then an empty one
    assert records.record_starts(data).tolist() == ends[:-1]


# --------------------------------------------------------------------------- scan_stamped


@st.composite
def stamped(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """Records a leader stamped (each its own timestamp, up to 2**64 - 1), maybe damaged as
    ``damaged`` does, and an append position: (bytes, first offset, start position)."""
    n = draw(st.integers(0, 6))
    first = draw(st.integers(0, 1 << 40))
    parts = []
    for i in range(n):
        ts = draw(st.one_of(st.integers(0, 1 << 20), st.just(MAX_U64)))
        data, _ends = writer._build_records_py(bytes(16), [draw(st.binary(max_size=40))],
                                               None, None, first + i, ts, 0)
        parts.append(data)
    raw = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["flip", "truncate", "extend", "offset", "reserved"]))
        if kind == "flip" and raw:
            raw[draw(st.integers(0, len(raw) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate" and raw:
            del raw[draw(st.integers(0, len(raw) - 1)):]
        elif kind == "extend":
            raw += draw(st.binary(max_size=70))
        elif kind == "offset":
            first = max(0, first + draw(st.integers(-2, 2)))
        elif kind == "reserved" and len(raw) >= fmt.HEADER_SIZE:
            raw[56:64] = draw(st.integers(1, MAX_U64)).to_bytes(8, "little")
    position = draw(st.one_of(st.integers(0, 1 << 20), st.just((1 << 32) - len(raw))))
    return bytes(raw), first, position


def _c_scan(raw: bytes, first: int, position: int) -> writer.StampedBatch:
    ends, max_ts, first_ts = C.scan_stamped(raw, first, position)
    return writer.StampedBatch(len(ends) - 1, ends, max_ts, first_ts)


def _stamped(function: Any, raw: bytes, first: int, position: int) -> tuple[Any, ...]:
    got = outcome(function, raw, first, position)
    if got[0] == "ok":
        batch = got[1]
        return ("ok", batch.count, batch.ends, batch.max_timestamp, batch.first_timestamp)
    return got


@SETTINGS
@given(stamped())
def test_scan_stamped(case: tuple[bytes, int, int]) -> None:
    """A follower's check of its leader's records: the same index positions, timestamps,
    or the same ValueError (naming the same byte, offset and reason) as the twin."""
    raw, first, position = case
    expected = _stamped(writer._scan_stamped_py, raw, first, position)
    assert _stamped(_c_scan, raw, first, position) == expected
    assert _stamped(writer.scan_stamped, raw, first, position) == expected


def test_scan_stamped_refuses_a_flipped_payload_bit_naming_the_record() -> None:
    data, ends = writer._build_records_py(bytes(48), [b"a", b"b", b"c"], None, None, 10, 5, 0)
    bad = bytearray(data)
    bad[ends[1] + 64] ^= 1
    with pytest.raises(ValueError, match=rf"record at byte {ends[1]} \(offset 11 expected\): "
                                         "checksum mismatch"):
        C.scan_stamped(bytes(bad), 10, 0)
    assert C.scan_stamped(data, 10, 100)[0] == [100 + e for e in ends]


KEYED = {b"": b"", b"k": b"\x01\x03keyk", b"user7": bytes(range(40)), b"\xff": b"h"}


@SETTINGS
@given(st.lists(st.sampled_from([*KEYED, b"missing"]), max_size=40),
       st.one_of(st.none(), st.binary(max_size=30)),
       st.one_of(st.integers(0, 1000), st.integers(MAX_U64 - 50, MAX_U64 + 2), st.integers(-3, -1)))
def test_keyed_headers(keys_in: list[bytes], tail: bytes | None, first: int) -> None:
    """Each message's headers by key (+ tail + u64 counter): byte for byte the twin's, and
    the same error (KeyError for an unknown key, OverflowError past a u64)."""
    want = outcome(fmt._keyed_headers_py, keys_in, KEYED, tail, first)
    assert outcome(C.keyed_headers, keys_in, KEYED, tail, first) == want
    assert outcome(C.keyed_headers, tuple(keys_in), KEYED, tail, first) == want


def test_keyed_headers_of_an_idempotent_batch() -> None:
    """What ``broker.core.producers.producer_headers`` gives one message at a time."""
    from broker.core.producers import producer_headers

    keys_in = [b"k", b"", b"user7"]
    tail = producer_headers(b"", "etl-7", 0)[:-8]
    want = [producer_headers(KEYED[key], "etl-7", 5 + i) for i, key in enumerate(keys_in)]
    for impl in (C.keyed_headers, fmt._keyed_headers_py):
        assert impl(keys_in, KEYED, tail, 5) == want
        assert impl(keys_in, KEYED, None, 5) == [KEYED[key] for key in keys_in]


# --------------------------------------------------------------------------- producer_runs


@st.composite
def producer_records(draw: st.DrawFn) -> bytes:
    """Stored records whose ids are producer ids of a few producers and epochs (sequences
    that mostly continue, random first/last marks, wrapping at 2**31), plain random ids and
    ids that only look like producer ids; offsets mostly dense; maybe cut or extended."""
    n = draw(st.integers(0, 12))
    offset = draw(st.integers(0, 1 << 40))
    seq = draw(st.one_of(st.integers(0, 50), st.just(idempotence.SEQUENCE_MODULUS - 2)))
    parts = []
    for _ in range(n):
        kind = draw(st.sampled_from(["producer"] * 6 + ["plain", "lookalike"]))
        if kind == "producer":
            seq = (seq + draw(st.sampled_from([1, 1, 1, 0, 2]))) % idempotence.SEQUENCE_MODULUS
            rid = idempotence.producer_record_id(
                draw(st.sampled_from([0, 7, (1 << 63) - 1])), draw(st.sampled_from([0, 1, 32767])),
                seq, draw(st.booleans()), draw(st.booleans()))
        elif kind == "plain":
            rid = draw(st.integers(0, (1 << 128) - 1))
        else:  # one bit off a producer id: in its mark, version or variant
            rid = idempotence.producer_record_id(1, 0, 0, True, True) ^ (
                1 << draw(st.sampled_from([119, 127, 77, 63])))
        offset += draw(st.sampled_from([1, 1, 1, 1, 2]))
        ts = draw(st.one_of(st.integers(0, 1 << 20), st.just(MAX_U64)))
        data, _ends = writer._build_records_py(rid.to_bytes(16, "little"),
                                               [draw(st.binary(max_size=20))], None, None,
                                               offset, ts, 0)
        parts.append(data)
    raw = bytearray(b"".join(parts))
    kind = draw(st.sampled_from(["none", "none", "truncate", "extend"]))
    if kind == "truncate" and raw:
        del raw[draw(st.integers(0, len(raw) - 1)):]
    elif kind == "extend":
        raw += draw(st.binary(max_size=70))
    return bytes(raw)


@SETTINGS
@given(producer_records())
def test_producer_runs(raw: bytes) -> None:
    """A replay's scan of stored records: the same runs, counts and end, or the same
    ValueError, as the twin (which is ``producer_runs_of`` over the decoded records)."""
    expected = outcome(idempotence._producer_runs_py, raw)
    assert outcome(C.producer_runs, raw) == expected
    assert outcome(idempotence.producer_runs, raw) == expected
    if expected[0] == "ok":
        rows = [(r.offset, r.id, r.timestamp) for r in fmt_records(raw)]
        assert idempotence.producer_runs_of(rows) == expected[1]


def fmt_records(raw: bytes) -> list[Any]:
    """The records of ``raw`` decoded one by one (``data.format.decode_record``)."""
    out, pos = [], 0
    while pos < len(raw):
        record, pos = fmt.decode_record(raw, pos)
        out.append(record)
    return out


def test_producer_runs_finds_whole_cut_and_continued_batches() -> None:
    """Two whole batches of two producers, a plain record, then a batch the log holds the
    first two records of: three runs, the last one not ending."""
    ids = [idempotence.producer_record_id(5, 1, s, s == 0, s == 1) for s in (0, 1)]
    ids += [idempotence.producer_record_id(9, 0, 7, True, True), 0x1234]
    ids += [idempotence.producer_record_id(5, 1, s, s == 2, False) for s in (2, 3)]
    raw = b"".join(writer._build_records_py(i.to_bytes(16, "little"), [b"v"], None, None,
                                            10 + n, 1000 + n, 0)[0] for n, i in enumerate(ids))
    runs, count, end = C.producer_runs(raw)
    assert (count, end) == (6, 16)
    assert runs == [(10, 11, 5, 1, 0, 1, True, True, 1001), (12, 12, 9, 0, 7, 7, True, True, 1002),
                    (14, 15, 5, 1, 2, 3, True, False, 1005)]
    with pytest.raises(ValueError, match="partial record at byte 325"):
        C.producer_runs(raw[:-1])
    assert idempotence._producer_runs_py(raw) == (runs, count, end)
