"""The compiled MessageSet builder (``broker.kafka._cfetch``) against its pure-Python twin
(hypothesis): the same bytes and count, or the same error, for the same stored records.

``message_set`` is the compiled loop when it is built; for a shape it does not answer
(user headers other than one key header, lengths that do not add up, bad arguments) it
declines and the twin (``_message_set_py``) answers. So the tests hold three things: the
public ``message_set`` gives exactly what the twin gives on any input, malformed included;
whatever the compiled loop answers itself equals the twin and the one-record-at-a-time
reference ``message_set_loop``; and it does answer the shapes Kafka producers write
(null keys and key headers, regular and irregular runs), so a loop that always declined
would fail here rather than only show as a slow broker.

Skipped where the extension is not built: the twin alone runs there.
"""

from __future__ import annotations

import os
import zlib
from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.kafka import mapping
from data import speedups
from data.format import (
    HEADER,
    KAFKA_HEADERS_NAME,
    KEY_HEADER_NAME,
    KIND_RAW,
    KIND_STRING,
    encode_user_headers,
    key_header,
)

try:
    from broker.kafka import _cfetch as C  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine
    C = None

pytestmark = pytest.mark.skipif(C is None, reason="broker.kafka._cfetch is not built (no C "
                                                  "compiler at install time): only the twin runs")

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MAX_I64 = (1 << 63) - 1
MAX_U64 = (1 << 64) - 1


def outcome(function: Any, *args: Any) -> tuple[Any, ...]:
    """``("ok", result)`` or ``("error", type, message)``."""
    try:
        return ("ok", function(*args))
    except Exception as exc:  # noqa: BLE001 - any exception is part of the contract here
        return ("error", type(exc), str(exc))


def record(offset: int, appended: int, origin: int, payload: bytes, headers: bytes) -> bytes:
    return HEADER.pack(0, 0, 0, offset, appended, origin, len(headers), len(payload), 0) \
        + payload + headers


def join(records: list[bytes]) -> tuple[bytes, list[int]]:
    ends, at = [], 0
    for r in records:
        at += len(r)
        ends.append(at)
    return b"".join(records), ends


key_bytes = st.binary(min_size=1, max_size=255)
kafka_headers = st.one_of(  # what the Kafka produce path writes: the compiled loop's shapes
    st.just(b""),
    key_bytes.map(key_header),
    key_bytes.map(lambda k: encode_user_headers([(KIND_STRING, KEY_HEADER_NAME, KIND_RAW, k)])),
)
other_headers = st.one_of(  # what V1 / Iggy clients may add: the twin's shapes
    st.lists(st.tuples(st.sampled_from([KIND_RAW, KIND_STRING]), st.binary(min_size=1, max_size=6),
                       st.sampled_from([KIND_RAW, KIND_STRING]), st.binary(min_size=1, max_size=6)),
             min_size=1, max_size=3).map(encode_user_headers),
    st.binary(min_size=1, max_size=40),  # not user headers at all
    key_bytes.map(lambda k: encode_user_headers([(KIND_RAW, b"t", KIND_RAW, b"x")]) + key_header(k)),
)
stamps = st.one_of(st.just(0), st.integers(0, 2**53), st.integers(0, MAX_U64))
payloads = st.binary(max_size=300)


@st.composite
def kafka_runs(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Records a Kafka producer's path writes: a regular run (one shape, the numpy twin's
    batch path) or an irregular one (its loop)."""
    first = draw(st.integers(0, MAX_I64 - 100))
    if draw(st.booleans()):
        n = draw(st.integers(1, 40))
        vlen = draw(st.integers(0, 120))
        kind = draw(st.sampled_from(["none", "string", "raw"]))
        klen = draw(st.integers(1, 255))
        out = []
        for i in range(n):
            key = draw(st.binary(min_size=klen, max_size=klen))
            headers = b"" if kind == "none" else key_header(key) if kind == "string" else \
                encode_user_headers([(KIND_STRING, KEY_HEADER_NAME, KIND_RAW, key)])
            out.append(record(first + i, draw(stamps), draw(stamps),
                              draw(st.binary(min_size=vlen, max_size=vlen)), headers))
        return join(out)
    items = draw(st.lists(st.tuples(stamps, stamps, payloads, kafka_headers), min_size=1,
                          max_size=30))
    return join([record(first + i, a, o, p, h) for i, (a, o, p, h) in enumerate(items)])


@st.composite
def any_runs(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Kafka runs, runs with other user headers, and malformed ones: cut, extended, ends
    moved, lengths that do not add up, offsets over 2^63 - 1."""
    raw, ends = draw(kafka_runs())
    choice = draw(st.sampled_from(["as is", "other headers", "cut raw", "move end", "extra bytes",
                                   "bad lengths", "huge offset", "random"]))
    if choice == "other headers":
        extra = record(0, 0, 0, draw(payloads), draw(other_headers))
        at = draw(st.integers(0, len(ends)))
        starts = [0, *ends]
        pieces = [raw[starts[i]:starts[i + 1]] for i in range(len(ends))]
        pieces.insert(at, extra)
        raw, ends = join(pieces)
    elif choice == "cut raw":
        raw = raw[:draw(st.integers(0, len(raw)))]
    elif choice == "move end":
        i = draw(st.integers(0, len(ends) - 1))
        ends = list(ends)
        ends[i] = draw(st.integers(-5, len(raw) + 70))
    elif choice == "extra bytes":
        raw += draw(st.binary(min_size=1, max_size=20))
        ends = list(ends)
        if draw(st.booleans()):
            ends[-1] = len(raw)
    elif choice == "bad lengths":
        i = draw(st.integers(0, len(ends) - 1))
        start = ([0, *ends])[i]
        field = draw(st.sampled_from([48, 52]))
        raw = bytearray(raw)
        raw[start + field:start + field + 4] = draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
        raw = bytes(raw)
    elif choice == "huge offset":
        start = ([0, *ends])[draw(st.integers(0, len(ends) - 1))]
        raw = bytearray(raw)
        raw[start + 24:start + 32] = draw(st.integers(MAX_I64 + 1, MAX_U64)).to_bytes(8, "little")
        raw = bytes(raw)
    elif choice == "random":
        raw = draw(st.binary(max_size=400))
        ends = draw(st.lists(st.integers(-2, 450), max_size=8))
    return raw, ends


budgets = st.one_of(st.integers(-5, 6000), st.sampled_from([0, 1, 25, 26, 33, 34, 1 << 20, 2**70]))
magics = st.sampled_from([0, 1])


def test_the_compiled_loop_runs_where_it_was_built() -> None:
    if os.environ.get(speedups.ENV, "") not in ("", "0"):
        pytest.skip(f"{speedups.ENV} is set: the twin runs by request")
    assert speedups.status["broker.kafka._cfetch"] == "compiled"
    assert mapping.message_set is mapping._message_set_compiled


@SETTINGS
@given(kafka_runs(), magics, budgets, st.booleans())
def test_kafka_records_are_answered_by_the_compiled_loop_as_by_the_twin(run, magic, budget,
                                                                       whole_first) -> None:
    """Null keys, string and raw key headers, regular and irregular runs, every budget
    (Fetch v3's whole first message included): the compiled loop answers itself, with the
    twin's and the reference loop's bytes and count."""
    raw, ends = run
    got = C.message_set(raw, ends, magic, budget, whole_first)
    assert got is not None
    assert got == mapping._message_set_py(raw, ends, magic, budget, whole_first)
    assert got == mapping.message_set_loop(raw, ends, magic, budget, whole_first)
    if whole_first:
        assert got[1] >= 1


@SETTINGS
@given(any_runs(), st.one_of(magics, st.sampled_from([2, -1])), budgets, st.booleans())
def test_any_input_gets_the_twins_answer(run, magic, budget, whole_first) -> None:
    """Any run, malformed included: the public ``message_set`` gives the twin's bytes or
    error; what the compiled loop answers itself is the twin's answer."""
    raw, ends = run
    expected = outcome(mapping._message_set_py, raw, ends, magic, budget, whole_first)
    assert outcome(mapping._message_set_compiled, raw, ends, magic, budget, whole_first) \
        == expected
    direct = C.message_set(raw, ends, magic, budget, whole_first)
    if direct is not None:
        assert ("ok", direct) == expected


def test_other_argument_types_decline() -> None:
    raw, ends = join([record(1, 2, 3, b"v", b"")])
    assert C.message_set(bytearray(raw), ends, 0, 100, True) is None
    assert C.message_set(raw, tuple(ends), 0, 100, True) is None
    assert C.message_set(raw, [float(ends[0])], 0, 100, True) is None
    assert C.message_set(raw, ends, 0, 100.0, True) is None
    assert C.message_set(raw, ends, 1, 100, True) is not None


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=600), st.integers(0, 15))
def test_crc32_is_zlibs(data, skip) -> None:
    """The table-driven CRC-32 at every length and alignment."""
    assert C.crc32(data[skip:]) == zlib.crc32(data[skip:])
    assert C.crc32(memoryview(data)[skip:]) == zlib.crc32(data[skip:])


# ---------------------------------------------------------------- record batches v2

header_lists = st.lists(st.tuples(st.binary(max_size=12), st.one_of(st.none(), st.binary(max_size=300))),
                        max_size=5)
iggy_headers = st.lists(st.tuples(st.integers(1, 15),
                                  # not the reserved name: a stray "kafka.headers" piece is a
                                  # malformed list, which the loop declines (any_runs has it)
                                  st.binary(min_size=1, max_size=14).filter(
                                      lambda n: n != KAFKA_HEADERS_NAME),
                                  st.integers(1, 15), st.binary(min_size=1, max_size=9)),
                        min_size=1, max_size=3).map(encode_user_headers)
batch_headers = st.one_of(  # what the v2 produce path writes, and what Iggy/V1 clients add
    kafka_headers,
    st.tuples(kafka_headers, header_lists).map(lambda t: t[0] + mapping.kafka_headers_user(t[1])),
    st.tuples(kafka_headers, iggy_headers).map(lambda t: t[0] + t[1]),
    st.tuples(kafka_headers, header_lists, iggy_headers).map(
        lambda t: t[0] + t[2] + mapping.kafka_headers_user(t[1])),
)
ms_stamps = st.one_of(st.just(0), st.integers(0, 2**50).map(lambda v: v * 1000),
                      st.sampled_from([5_000, 5_999, 6_000]))


@st.composite
def batch_runs(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Stored records as the produce paths write them, headers of every kind included."""
    first = draw(st.integers(0, MAX_I64 - 100))
    items = draw(st.lists(st.tuples(ms_stamps, ms_stamps, payloads, batch_headers), min_size=1,
                          max_size=25))
    return join([record(first + i, a, o, p, h) for i, (a, o, p, h) in enumerate(items)])


epochs = st.sampled_from([-1, 0, 7, 2**31 - 1])


@SETTINGS
@given(batch_runs(), budgets, st.booleans(), st.booleans(), epochs)
def test_record_batches_are_built_by_the_compiled_loop_as_by_the_twin(run, budget, whole_first,
                                                                      lat, epoch) -> None:
    """Stored records with keys and headers (Kafka lists kept plain or in ``kafka.headers``,
    Iggy user headers), both timestamp types, every budget: the compiled loop answers
    itself with the twin's bytes and count, and the batches decode to what was stored."""
    from broker.kafka.codec import decode_batches

    raw, ends = run
    got = C.record_batches(raw, ends, budget, whole_first, lat, epoch)
    assert got is not None
    assert got == mapping._record_batches_py(raw, ends, budget, whole_first, lat, epoch)
    data, count = got
    if whole_first:
        assert count >= 1
    if budget >= 0 and count > 1:
        assert len(data) <= budget
    batches = decode_batches(data)
    assert sum(len(b.records) for b in batches) == count
    starts = [0, *ends]
    got_records = [(b.base_offset + r.offset_delta, r.key, r.value, r.headers)
                   for b in batches for r in b.records]
    for i, (offset, key, value, headers) in enumerate(got_records):
        stored = raw[starts[i]:ends[i]]
        h = HEADER.unpack_from(stored)
        assert offset == h[3]
        assert value == stored[64:64 + h[7]]
        want_key, want_headers = mapping.stored_kafka(stored[64 + h[7]:])
        assert key == want_key
        from broker.kafka.codec import decode_headers
        assert headers == decode_headers(want_headers)


@SETTINGS
@given(any_runs(), budgets, st.booleans(), st.booleans(), st.one_of(epochs, st.just(2**40)))
def test_any_input_gets_the_twins_batches(run, budget, whole_first, lat, epoch) -> None:
    """Any run, malformed included: the public ``record_batches`` gives the twin's bytes or
    error; what the compiled loop answers itself is the twin's answer."""
    raw, ends = run
    expected = outcome(mapping._record_batches_py, raw, ends, budget, whole_first, lat, epoch)
    assert outcome(mapping._record_batches_compiled, raw, ends, budget, whole_first, lat,
                   epoch) == expected
    direct = C.record_batches(raw, ends, budget, whole_first, lat, epoch)
    if direct is not None:
        assert ("ok", direct) == expected


@SETTINGS
@given(st.binary(max_size=2000))
def test_crc32c_is_castagnolis(data) -> None:
    """The compiled CRC-32C (hardware and tables) against google-crc32c's."""
    from broker.kafka.codec import crc32c

    assert C.crc32c(data) == C.crc32c_tables(data) == crc32c(data)
    assert C.crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C


def test_record_batches_decline_other_argument_types() -> None:
    raw, ends = join([record(1, 2, 3, b"v", b"")])
    assert C.record_batches(bytearray(raw), ends, 100, True, False, -1) is None
    assert C.record_batches(raw, tuple(ends), 100, True, False, -1) is None
    assert C.record_batches(raw, ends, 100, True, False, 2**40) is None
    assert C.record_batches(raw, np.array(ends, dtype=np.int32), 100, True, False, -1) is None
    assert C.record_batches(raw, np.array(ends, dtype=np.float64), 100, True, False, -1) is None


@SETTINGS
@given(st.one_of(batch_runs(), any_runs()), budgets, st.booleans(), st.booleans(), epochs)
def test_record_batches_read_int64_ends_in_place(run, budget, whole_first, lat, epoch) -> None:
    """The ends as an int64 array (what a Kafka fetch passes: ``read_raw(ends_array=True)``):
    the compiled loop answers exactly as with the list, and the public ``record_batches``
    gives the twin's bytes or error (a declined shape goes to the twin as a list)."""
    raw, ends = run
    as_array = np.array(ends, dtype=np.int64)
    assert C.record_batches(raw, as_array, budget, whole_first, lat, epoch) == \
        C.record_batches(raw, ends, budget, whole_first, lat, epoch)
    assert C.record_batches(raw, array("q", ends), budget, whole_first, lat, epoch) == \
        C.record_batches(raw, ends, budget, whole_first, lat, epoch)
    expected = outcome(mapping._record_batches_py, raw, ends, budget, whole_first, lat, epoch)
    assert outcome(mapping._record_batches_compiled, raw, as_array, budget, whole_first, lat,
                   epoch) == expected


# ---------------------------------------------------------------- produce: batches framed

produced_records = st.lists(st.tuples(
    st.integers(-2**40, 2**40),                                   # timestamp delta
    st.one_of(st.none(), st.binary(max_size=4), st.binary(min_size=250, max_size=260),
              st.text(max_size=5).map(str.encode)),              # key
    st.one_of(st.none(), st.binary(max_size=200)),               # value
    st.one_of(st.just(()), header_lists.map(tuple))), min_size=1, max_size=12)


@st.composite
def opened_batches(draw: st.DrawFn) -> tuple[Any, ...]:
    """Opened batches as a producer's would be (``split_batches``), some with their body
    cut, extended or overwritten: the compiled framing or its refusal is the reference's."""
    from broker.kafka.codec import BatchRecord, RecordBatch, encode_batch, split_batches

    batches = []
    for _ in range(draw(st.integers(1, 3))):
        rows = draw(produced_records)
        records = tuple(BatchRecord(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows))
        base = draw(st.sampled_from([0, 1_700_000_000_000, -1, 2**62]))
        attributes = draw(st.sampled_from([0, 8]))
        batches.append(encode_batch(RecordBatch(0, base, records, attributes=attributes)))
    raws = list(split_batches(b"".join(batches)))
    if draw(st.booleans()):
        i = draw(st.integers(0, len(raws) - 1))
        body = bytearray(raws[i].body)
        at = draw(st.integers(0, len(body)))
        body[at:at + draw(st.integers(0, 3))] = draw(st.binary(max_size=3))
        raws[i] = type(raws[i])(raws[i].head, raws[i].count, bytes(body))
    return tuple(raws)


@SETTINGS
@given(opened_batches(), st.sampled_from([0, 50, 1 << 20]))
def test_produced_batches_are_framed_by_the_compiled_loop_as_by_the_reference(raws, limit):
    """Records with and without keys (ASCII, not, over 255 bytes), headers, values over
    the limit, timestamps the store cannot hold, bodies cut or overwritten: the compiled
    framing gives the reference's stored records or the reference's refusal."""
    expected = outcome(mapping._framed_raw_py, raws, 123, limit)
    assert outcome(mapping.framed_raw_batches, raws, 123, limit) == expected


@pytest.mark.parametrize("headers", [
    (),                                                    # librdkafka's defaults
    ((b"trace", b"abc"), (b"caf\xc3\xa9", b"\x00")),        # one Iggy header each
    ((b"d", b"1"), (b"d", None), (b"", b""), (b"big", b"v" * 600)),  # the reserved list
])
def test_a_producers_batch_is_framed_by_the_compiled_loop(headers) -> None:
    """What producers send (keys ASCII, UTF-8, binary or none; headers of both stored
    forms) does not fall back to the per-record path."""
    from broker.kafka.codec import BatchRecord, RecordBatch, encode_batch, split_batches

    keys = [None, b"key", "clé".encode(), b"\xff\xfe"]
    (raw,) = split_batches(encode_batch(RecordBatch(0, 1_700_000_000_000, tuple(
        BatchRecord(i, i, keys[i % 4], b"v" * i, headers) for i in range(50)))))
    got = C.frame_batch(raw.body, raw.count, raw.head.base_timestamp, raw.head.max_timestamp,
                        False, raw.head.last_offset_delta, 5, 1 << 20)
    assert got is not None
    assert got == mapping._framed_raw_py((raw,), 5, 1 << 20)


# ---------------------------------------------------------------- tombstones (compacted topics)

tombstone_payloads = st.one_of(st.just(b""), payloads)


@st.composite
def tombstone_runs(draw: st.DrawFn, headers: st.SearchStrategy[bytes]) -> tuple[bytes, list[int]]:
    """A compacted topic's records: empty payloads (its tombstones) among values."""
    first = draw(st.integers(0, MAX_I64 - 100))
    items = draw(st.lists(st.tuples(ms_stamps, ms_stamps, tombstone_payloads, headers),
                          min_size=1, max_size=25))
    return join([record(first + i, a, o, p, h) for i, (a, o, p, h) in enumerate(items)])


def _stored_values(raw: bytes, ends: list[int]) -> list[bytes]:
    starts = [0, *ends]
    return [raw[starts[i] + 64:starts[i] + 64 + HEADER.unpack_from(raw, starts[i])[7]]
            for i in range(len(ends))]


@SETTINGS
@given(tombstone_runs(batch_headers), budgets, st.booleans(), st.booleans(), epochs)
def test_compiled_record_batches_send_tombstones_as_null_values(run, budget, whole_first, lat,
                                                                 epoch) -> None:
    """With ``empty_is_null`` (a compacted topic) the compiled loop answers itself, with the
    twin's bytes: every empty stored value is a null value in the batches, every other
    value is as stored; without it the empty values stay empty."""
    from broker.kafka.codec import decode_batches

    raw, ends = run
    got = C.record_batches(raw, ends, budget, whole_first, lat, epoch, True)
    assert got is not None
    assert got == mapping._record_batches_py(raw, ends, budget, whole_first, lat, epoch, True)
    data, count = got
    values = [r.value for b in decode_batches(data) for r in b.records]
    stored = _stored_values(raw, ends)[:count]
    assert values == [v or None for v in stored]
    plain = C.record_batches(raw, ends, budget, whole_first, lat, epoch)
    assert [r.value for b in decode_batches(plain[0]) for r in b.records] == stored


@SETTINGS
@given(tombstone_runs(kafka_headers), magics, budgets, st.booleans())
def test_compiled_message_set_sends_tombstones_as_null_values(run, magic, budget,
                                                              whole_first) -> None:
    """The MessageSet (magic 0/1) with ``empty_is_null``: the compiled loop answers itself
    with the reference loop's bytes, where each empty value is a null value (length -1)."""
    raw, ends = run
    got = C.message_set(raw, ends, magic, budget, whole_first, True)
    assert got is not None
    assert got == mapping.message_set_loop(raw, ends, magic, budget, whole_first, True)
    assert got == mapping._message_set_py(raw, ends, magic, budget, whole_first, True)
    nulls = sum(1 for v in _stored_values(raw, ends)[:got[1]] if not v)
    plain = C.message_set(raw, ends, magic, budget, whole_first)
    assert len(plain[0]) == len(got[0])
    assert got[0].count(b"\xff\xff\xff\xff") - plain[0].count(b"\xff\xff\xff\xff") == nulls


@SETTINGS
@given(any_runs(), budgets, st.booleans(), st.booleans(), magics)
def test_any_input_gets_the_twins_tombstones(run, budget, whole_first, lat, magic) -> None:
    """Any run, malformed included, with ``empty_is_null``: the public loops give the twins'
    bytes or error."""
    raw, ends = run
    assert outcome(mapping._record_batches_compiled, raw, ends, budget, whole_first, lat, -1,
                   True) == outcome(mapping._record_batches_py, raw, ends, budget,
                                    whole_first, lat, -1, True)
    assert outcome(mapping._message_set_compiled, raw, ends, magic, budget, whole_first,
                   True) == outcome(mapping._message_set_py, raw, ends, magic, budget,
                                    whole_first, True)
