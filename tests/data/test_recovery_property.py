"""Property test (hypothesis): random batches, random clean and unclean restarts, random
damage to the tail -> reopening always succeeds, next_offset is the number of intact
records, and every intact record reads back byte for byte.

The stores here skip fsync (``NoSyncFileLayer``): this is about what recovery keeps, not
about durability (test_crash.py and test_faults.py cover that with real fsyncs)."""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data import format as fmt
from data.store import StorageConfig, Store, TopicConfig
from tests.data.support import (
    append_bytes,
    flip_byte,
    segment_logs,
    stop_uncleanly,
    truncate_file,
)
from tests.fakes.fs import NoSyncFileLayer

# 2 x 500 examples: >= 1000 in CI, well under a minute on two cores.
PROPERTY = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

messages = st.tuples(
    st.binary(max_size=300),
    st.one_of(st.just(b""), st.binary(min_size=1, max_size=40).map(fmt.key_header)),
)
batches = st.lists(messages, min_size=1, max_size=8)
DAMAGES = ("none", "truncate", "garbage", "zeros", "flip_last", "index", "timeindex")


def _append(store: Store, model: list[bytes], batch: list[tuple[bytes, bytes]]) -> None:
    plog = store.partition("t", 0)
    first = plog.append([p for p, _ in batch], [h for _, h in batch])
    assert first == len(model)
    got = plog.read(first, max_messages=len(batch), max_bytes=1 << 30)
    assert [(r.payload, r.user_headers) for r in got.records] == batch
    assert got.raw == b"".join(r.to_bytes() for r in got.records)
    model.extend(r.to_bytes() for r in got.records)


def _damage(root: str, model: list[bytes], kind: str, data: st.DataObject) -> int:
    """Damage the newest segment; return how many records stay intact."""
    logs = segment_logs(root, "t", 0)
    last = logs[-1]
    base = int(os.path.basename(last)[:-4])
    tail = model[base:]
    size = sum(len(r) for r in tail)
    assert os.path.getsize(last) == size
    if kind == "truncate" and size:
        cut = data.draw(st.integers(0, size - 1), label="cut")
        truncate_file(last, cut)
        kept, pos = 0, 0
        for rec in tail:
            if pos + len(rec) > cut:
                break
            pos += len(rec)
            kept += 1
        return base + kept
    if kind == "garbage":
        append_bytes(last, data.draw(st.binary(min_size=1, max_size=200), label="garbage"))
    elif kind == "zeros":
        append_bytes(last, bytes(data.draw(st.integers(1, 4096), label="zeros")))
    elif kind == "flip_last" and size:
        flip_byte(last, size - len(tail[-1]) + data.draw(st.integers(0, len(tail[-1]) - 1), label="flip"))
        return len(model) - 1
    elif kind in ("index", "timeindex"):
        victim = data.draw(st.sampled_from(logs), label="victim")[:-4] + "." + kind
        if data.draw(st.booleans(), label="remove"):
            os.remove(victim)
        else:
            truncate_file(victim, data.draw(st.integers(0, os.path.getsize(victim)), label="isize"))
    return len(model)


def _check(store: Store, model: list[bytes]) -> None:
    plog = store.partition("t", 0)
    assert plog.first_offset == 0
    assert plog.next_offset == len(model)
    got = plog.read(0, max_messages=100_000, max_bytes=1 << 30)
    assert [r.to_bytes() for r in got.records] == model
    assert got.raw == b"".join(model)


def _scenario(data: st.DataObject, segment_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        config = StorageConfig(segment_bytes=segment_bytes)
        fs = NoSyncFileLayer()
        store = Store(root, config, fs=fs)
        store.create_topic("t", TopicConfig(partitions=1))
        model: list[bytes] = []
        for _cycle in range(data.draw(st.integers(1, 4), label="cycles")):
            for batch in data.draw(st.lists(batches, max_size=4), label="batches"):
                _append(store, model, batch)
            if data.draw(st.booleans(), label="clean stop"):
                store.close()
            else:
                stop_uncleanly(store)
            intact = _damage(root, model, data.draw(st.sampled_from(DAMAGES), label="damage"), data)
            del model[intact:]
            store = Store(root, config, fs=fs)
            _check(store, model)
        _append(store, model, [(b"after", b"")])
        _check(store, model)
        store.close()


class RecoveryPropertyTests:

    @PROPERTY
    @given(st.data())
    def test_small_segments(self, data):
        """Many rolls (segments of a few records): recovery keeps exactly the intact prefix."""
        _scenario(data, data.draw(st.sampled_from([200, 500, 900]), label="segment_bytes"))

    @PROPERTY
    @given(st.data())
    def test_larger_segments(self, data):
        """Few rolls (everything in one or two segments): same property."""
        _scenario(data, data.draw(st.sampled_from([4096, 1 << 20]), label="segment_bytes"))
