"""Bundles <-> stored records (``broker.tank.codec.stored``), the transport's hot paths.

``bundle_to_records`` is held to ``decode_bundle`` (the codec's plain decoder): the same
messages framed the same way for valid bundles, and the same verdict for damaged ones,
through both its per-message walk and its numpy path for alike messages.
``records_to_bundles`` is read back with the independent client, and its numpy path must
give exactly the per-message path's bytes.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from broker.tank import client as tc
from broker.tank import codec as sc
from broker.tank.codec import stored
from data.format import HEADER, KEY_HEADER_NAME, encode_user_headers

TS = 1_700_000_000_000


def reference_area(bundle: bytes, limit: int = 1 << 20) -> tuple[bytes, list[int], list | None]:
    """What ``bundle_to_records`` must give, built from ``decode_bundle``'s messages."""
    decoded = sc.decode_bundle(bundle)
    area = bytearray()
    ends = []
    for m in decoded.messages:
        if len(m.content) > limit or m.ts * 1000 >= 1 << 64:
            raise sc.BundleError("limit")
        uh = b""
        if m.key:
            try:
                m.key.decode("utf-8")
                kind = 2
            except UnicodeDecodeError:
                kind = 1
            uh = encode_user_headers([(2, KEY_HEADER_NAME, kind, m.key)])
        area += HEADER.pack(0, 0, 0, 0, 0, m.ts * 1000, len(uh), len(m.content), 0)
        area += m.content + uh
        ends.append(len(area))
    seqs = [m.seq for m in decoded.messages] if decoded.sparse else None
    return bytes(area), ends, seqs


def random_msgs(rng: random.Random, uniform: bool) -> list[tc.Msg]:
    n = rng.choice([1, 2, 3, 15, 16, 40, 600])
    size = rng.choice([0, 5, 127, 128, 300])
    key = rng.choice([b"", b"k", b"\xff\x00"])
    out = []
    for i in range(n):
        if uniform:
            out.append(tc.Msg(b"%c" % (i % 256) * size, key, TS))
        else:
            out.append(tc.Msg(rng.randbytes(rng.randint(0, 200)), rng.choice([b"", b"a", key]),
                              TS + rng.randint(0, 2)))
    return out


@pytest.mark.parametrize("seed", range(60))
def test_bundle_to_records_matches_decode_bundle(seed: int) -> None:
    rng = random.Random(seed)
    msgs = random_msgs(rng, uniform=seed % 2 == 0)
    if seed % 5 == 0:  # sparse, with gaps
        seq = rng.randint(1, 1000)
        sparse = []
        for m in msgs:
            sparse.append(tc.Msg(m.content, m.key, m.ts, seq))
            seq += rng.choice([1, 1, 3])
        msgs = sparse
    bundle = tc.bundle_for(msgs, compress=rng.random() < 0.5)
    area, ends, seqs = reference_area(bundle)
    got = sc.bundle_to_records(bundle, max_message_bytes=1 << 20)
    assert (got.area, got.ends, got.seqs) == (area, ends, seqs)
    for _ in range(40):  # damaged copies: the same verdict, the same records
        bad = bytearray(bundle)
        for _ in range(rng.randint(1, 3)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        bad = bytes(bad[:rng.randint(1, len(bad))]) if rng.random() < 0.3 else bytes(bad)
        try:
            want = reference_area(bad)
        except sc.CodecError:
            want = None
        try:
            have = sc.bundle_to_records(bad, max_message_bytes=1 << 20)
            have = (have.area, have.ends, have.seqs)
        except sc.BundleError:
            have = None
        assert have == want


def test_message_limit_and_timestamp_overflow() -> None:
    with pytest.raises(sc.BundleError):
        sc.bundle_to_records(tc.bundle_for([tc.Msg(b"x" * 11)] * 3), max_message_bytes=10)
    with pytest.raises(sc.BundleError):
        sc.bundle_to_records(tc.bundle_for([tc.Msg(b"x", ts=(1 << 64) - 1)]),
                             max_message_bytes=10)


def stored_records(batches: list[list[tc.Msg]]) -> tuple[bytes, list[int]]:
    """Records as the store keeps them: one stored timestamp per batch."""
    raw = bytearray()
    ends = []
    for n, msgs in enumerate(batches):
        s = sc.bundle_to_records(tc.bundle_for(msgs), max_message_bytes=1 << 20)
        area = np.frombuffer(bytearray(s.area), dtype=np.uint8).copy()
        starts = [0, *s.ends[:-1]]
        for st in starts:
            area[st + 32:st + 40] = np.frombuffer((1000 + n).to_bytes(8, "little"), np.uint8)
        base = len(raw)
        raw += area.tobytes()
        ends += [base + e for e in s.ends]
    return bytes(raw), ends


@pytest.mark.parametrize("seed", range(30))
def test_records_to_bundles_read_back(seed: int) -> None:
    rng = random.Random(seed)
    batches = [random_msgs(rng, uniform=rng.random() < 0.5) for _ in range(rng.randint(1, 4))]
    raw, ends = stored_records(batches)
    bundles = sc.records_to_bundles(raw, ends)
    got = tc.read_chunk(sc.chunk_within(bundles, 1 << 30)[0], 7)
    sent = [m for batch in batches for m in batch]
    assert [(c.seq, c.ts, c.key, c.content) for c in got.messages] == [
        (7 + i, m.ts, m.key, m.content) for i, m in enumerate(sent)]


@pytest.mark.parametrize("size, key", [(0, b""), (100, b""), (127, b"k"), (200, b"key"),
                                       (5, b"\xff")])
def test_numpy_bundle_is_the_plain_bundle(size: int, key: bytes) -> None:
    msgs = [tc.Msg(bytes([i % 256]) * size, key, TS) for i in range(700)]
    raw, ends = stored_records([msgs])
    n = len(ends)
    ends_a = np.asarray(ends, dtype=np.int64)
    starts = np.concatenate([[0], ends_a[:-1]])
    u4 = np.ndarray((len(raw) - 3,), "<u4", raw, strides=(1,))
    pls, uhls = u4[starts + 52], u4[starts + 48]
    ts = np.full(n, TS, dtype=np.uint64)
    fast = stored._uniform_bundle(raw, starts, ends_a, pls, uhls, ts, 0, n)
    plain = stored._bundle(raw, (starts + 64).tolist(), pls.tolist(),
                           uhls.tolist() if key else None, ts.tolist(), 0, n)
    assert fast is not None and fast == plain


def test_chunk_within() -> None:
    a, b = b"\x04" + b"a" * 10, b"\x04" + b"b" * 30
    assert sc.chunk_within([a, b], 1000) == (b"\x0b" + a + b"\x1f" + b, 2)
    assert sc.chunk_within([a, b], 20) == ((b"\x0b" + a + b"\x1f" + b)[:20], 1)
    assert sc.chunk_within([b, a], 5) == (b"\x1f" + b, 1)  # the first goes whole


def test_budget_stops_after_the_bundle_a_chunk_cuts() -> None:
    """With a budget, the bundles before the cut are the same as without one, the last
    one is built from just the records the budget reaches (counted uncompressed: a
    compressible run gives fewer messages than it could), and the client reads a prefix of
    the messages."""
    batches = [[tc.Msg(bytes([i]) * 50, b"k" if i % 3 else b"", TS)] * 30 for i in range(6)]
    raw, ends = stored_records(batches)
    every = sc.records_to_bundles(raw, ends)
    sent = [m for batch in batches for m in batch]
    for budget in (1, 60, 500, 1600, 1700, 5000, 100000):
        some = sc.records_to_bundles(raw, ends, budget)
        chunk, whole = sc.chunk_within(some, budget)
        assert some[:whole - 1] == every[:whole - 1] and len(some) <= len(every)
        got = tc.read_chunk(chunk, 1).messages
        assert [(m.key, m.content) for m in got] == [(m.key, m.content)
                                                     for m in sent[:len(got)]]


def test_snappy_on_the_producer_rule_when_it_pays() -> None:
    """Over 1 KiB of contents: snappy when it makes the bundle smaller, else plain."""
    alike, _ = stored_records([[tc.Msg(b"y" * 400, b"", TS)] * 3]), None
    (bundle,) = sc.records_to_bundles(*alike)
    assert bundle[0] & 0x03 == 1
    rng = random.Random(3)
    noise = stored_records([[tc.Msg(rng.randbytes(400), b"", TS) for _ in range(3)]])
    (bundle,) = sc.records_to_bundles(*noise)
    assert bundle[0] & 0x03 == 0
    small = stored_records([[tc.Msg(b"y" * 100, b"", TS)] * 3])
    (bundle,) = sc.records_to_bundles(*small)
    assert bundle[0] & 0x03 == 0  # 300 bytes: the producer would not compress
