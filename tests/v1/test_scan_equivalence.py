"""The compiled PRODUCE scan (``broker.v1._cscan``) against its pure-Python twin
(``codec._scan_produce_py``, the regex): the same run, the same position, for any bytes.

Skipped where the extension is not built (no C compiler at install time).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.v1 import codec
from data import speedups

try:
    from broker.v1 import _cscan as C  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the machine
    C = None

pytestmark = pytest.mark.skipif(C is None, reason="broker.v1._cscan is not built: only the twin runs")

SETTINGS = settings(max_examples=500, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

names = st.one_of(st.sampled_from([b"orders", b"t", b".", b"..", b"...", b"__x", b"_x", b"a.b-c_9"]),
                  st.from_regex(rb"\A[A-Za-z0-9._-]{1,8}\Z"),
                  st.binary(min_size=1, max_size=6).filter(lambda b: b" " not in b),
                  st.integers(248, 251).map(lambda n: b"t" * n))
keys = st.one_of(st.sampled_from([b"", b"user1", b"a:b", b"k,1", b"k|1"]),
                 st.integers(254, 257).map(lambda n: b"k" * n))
values = st.one_of(st.sampled_from([b"", b"created", b"x:y:z", b"a,b", b"a b", b"\xc3\xa9", b"v\r"]),
                   st.binary(max_size=12), st.integers(1, 40).map(lambda n: b"v" * n))
acks = st.sampled_from([b"", b" acks=0", b" acks=1", b" acks=all", b" acks=2", b" acks=", b"  acks=1"])
ends = st.sampled_from([b"\n", b"\r\n", b"\r\r\n", b"", b" \n"])
cids = st.one_of(st.sampled_from([b"1", b"abc", b"", b"a|b", b"~{}"]),
                 st.from_regex(rb"\A[\x21-\x7b\x7d\x7e]{1,5}\Z"), st.binary(min_size=1, max_size=4))


good_names = st.one_of(st.sampled_from([b"orders", b"t", b"a.b-c_9", b"t" * 249]),
                       st.from_regex(rb"\A[A-Za-z0-9._-]{1,8}\Z"))
good_keys = st.one_of(st.sampled_from([b"", b"user1", b"k" * 255]),
                      st.from_regex(rb"\A[\x21-\x2b\x2d-\x39\x3b-\x7b\x7d\x7e]{0,6}\Z"))
good_values = st.one_of(st.sampled_from([b"", b"created", b"x:y:z", b"v" * 10]),
                        st.from_regex(rb"\A[\x21-\x2b\x2d-\x7b\x7d\x7e]{0,12}\Z"))
good_acks = st.sampled_from([b"", b" acks=0", b" acks=1", b" acks=all"])
good_ends = st.sampled_from([b"\n", b"\r\n"])
good_cids = st.from_regex(rb"\A[\x21-\x7b\x7d\x7e]{1,5}\Z")


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["good"] * 12 + ["odd"] * 3 + ["other", "noise"]))
    if kind == "noise":
        return draw(st.binary(max_size=40))
    if kind == "other":
        return draw(st.sampled_from([b"V1|1|PING|\n", b"V1|2|CONSUME|t 0 0\n", b"v1|1|PRODUCE|t k:v\n",
                                     b"V1|1|PRODUCE |t k:v\n", b"V1|1|PRODUCE|t k:v", b"\n"]))
    if kind == "good":  # the plain shape (names like ".", "__x" and the limits still apply)
        parts = (good_cids, good_names, good_keys, good_values, good_acks, good_ends)
    else:  # any field may be off the shape
        parts = (cids, names, keys, values, acks, ends)
    cid, topic, key, value, ack, end = (draw(part) for part in parts)
    line = b"V1|" + cid + b"|PRODUCE|" + topic + b" " + key + b":" + value + ack + end
    if kind == "odd" and draw(st.booleans()) and line:  # and a byte changed anywhere
        at = draw(st.integers(0, len(line) - 1))
        line = line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1:]
    return line


def outcome(function: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", function(*args))
    except Exception as exc:  # noqa: BLE001 - any exception is part of the contract here
        return ("error", type(exc), str(exc))


@SETTINGS
@given(st.lists(lines(), max_size=8), st.data(), st.one_of(st.just(32), st.integers(0, 40)),
       st.sampled_from([0, 40, 64, 300] + [1 << 20] * 4), st.sampled_from([0, 3, 10] + [1 << 20] * 3))
def test_scan_produce(chunks: list[bytes], data: st.DataObject, most: int, max_line: int,
                      max_value: int) -> None:
    buffer = b"".join(chunks)
    # Mostly at a line's start (where the framer's cursor is), sometimes anywhere.
    starts = [sum(map(len, chunks[:i])) for i in range(len(chunks) + 1)]
    pos = data.draw(st.one_of(st.just(0), st.sampled_from(starts), st.integers(0, len(buffer) + 2)))
    expected = outcome(codec._scan_produce_py, buffer, pos, most, max_line, max_value)
    assert outcome(C.scan_produce, buffer, pos, most, max_line, max_value) == expected


def test_scan_produce_takes_a_run() -> None:
    buffer = b"V1|1|PRODUCE|t k:v\nV1|2|PRODUCE|t :w acks=all\r\nV1|3|PING|\n"
    for impl in (C.scan_produce, codec._scan_produce_py):
        run, pos = impl(buffer, 0, 32, 1024, 1024)
        assert run == [(b"1", b"t", b"k", b"v", "1", 0), (b"2", b"t", b"", b"w", "all", 19)]
        assert buffer[pos:] == b"V1|3|PING|\n"


def test_the_server_runs_the_compiled_scan() -> None:
    if speedups.status.get("broker.v1._cscan") != "compiled":
        pytest.skip("the twin runs by request (SKERRY_NO_EXTENSIONS)")
    assert codec.scan_produce is C.scan_produce


tokens = st.lists(st.one_of(
    st.builds(lambda cid: [None, cid], st.binary(max_size=8)),
    st.builds(lambda cid: [b"old", cid, 123.0], st.binary(max_size=8)),
    st.builds(lambda cid: [None, bytearray(cid)], st.binary(max_size=4)),
    st.sampled_from([(None, b"1"), [None], [None, "1"], [None, 7], None]),
), max_size=6)


@SETTINGS
@given(tokens, st.integers(0, 1 << 31), st.integers(0, 1 << 62), st.integers(-1, 1 << 62))
def test_fill_produce_ok(slots: list[Any], partition: int, first: int, hw: int) -> None:
    """Both fill the same replies into the same slots, and fail on the same token."""
    copy = [list(s) if isinstance(s, list) else s for s in slots]
    from broker.v1.codec import replies

    expected = outcome(replies._fill_produce_ok_py, slots, partition, first, hw)
    assert outcome(C.fill_produce_ok, copy, partition, first, hw) == expected
    assert copy == slots


def test_fill_produce_ok_replies() -> None:
    from broker.v1.codec import replies

    for impl in (C.fill_produce_ok, replies._fill_produce_ok_py):
        slots = [[None, b"a"], [None, b"7"]]
        impl(slots, 2, 40, 41)
        assert slots == [[b"V1|a|OK|partition=2 offset=40 hw=41\n", b"a"],
                         [b"V1|7|OK|partition=2 offset=41 hw=41\n", b"7"]]


# --------------------------------------------------------------------------- PRODUCE_BATCH cut


def _cut(function: Any, data: bytes, max_value: int) -> tuple[Any, ...]:
    try:
        return ("ok", function(data, max_value))
    except Exception as exc:  # noqa: BLE001 - the error is part of the contract
        return ("error", type(exc), str(exc))


@st.composite
def produce_batches(draw: st.DrawFn) -> bytes:
    """A PRODUCE_BATCH batch (``encode_batch``), often damaged: cut short, extended, a
    length or the count changed."""
    from broker.client.codec import encode_batch

    n = draw(st.integers(1, 6))
    data = bytearray(encode_batch(draw(st.lists(st.binary(max_size=5), min_size=n, max_size=n)),
                                  draw(st.lists(st.binary(max_size=12), min_size=n, max_size=n))))
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["cut", "extend", "flip", "count"]))
        if kind == "cut":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=8))
        elif kind == "flip" and data:
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "count" and len(data) >= 4:
            data[:4] = draw(st.sampled_from([0, 1, 7, 0xFFFFFFFF])).to_bytes(4, "little")
    return bytes(data)


@SETTINGS
@given(st.one_of(produce_batches(), st.binary(max_size=40)), st.sampled_from([0, 1, 5, 12, 1 << 20]))
def test_decode_batch_compiled_and_twin(data: bytes, max_value: int) -> None:
    """The same keys and values, or the same BadRequest, as the reference; the compiled cut
    takes every batch the reference takes (None is only for a batch it refuses)."""
    expected = _cut(codec.parse._decode_batch_py, data, max_value)
    assert _cut(codec.parse.decode_batch, data, max_value) == expected
    split = C.split_batch(data, max_value)
    assert (split is None) == (expected[0] == "error")
    if split is not None:
        assert split == expected[1]


def test_decode_batch_runs_compiled_where_built() -> None:
    """Where broker.v1._cscan is built (every install with a C compiler, CI's too), the
    broker cuts PRODUCE_BATCH with it; only SKERRY_NO_EXTENSIONS=1 leaves the twin alone."""
    if speedups.status.get("broker.v1._cscan") != "compiled":
        pytest.skip("the twin runs by request (SKERRY_NO_EXTENSIONS)")
    assert codec.parse._split_batch is C.split_batch
