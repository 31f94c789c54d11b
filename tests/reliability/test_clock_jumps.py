"""Wall-clock jumps forward and back: what they may change and what they must not.

The broker reads two clocks. Timers (group session timeouts, idle connections, ack
timeouts, the retention and fsync loops) run on the reactor's clock, which ``skerry serve``
makes monotonic; here it is a ``task.Clock``. Record timestamps, and so time-based retention
and ``OFFSETS ts=``, come from the wall clock, injected here as ``now_us`` (and also patched
into ``time.time``/``time.time_ns`` for the group test, so that code reading the wall clock
directly would be caught). Each test jumps the wall clock while the reactor clock moves on
steadily, as NTP stepping a server's clock does.

Decisions these tests pin down (docs/reliability.md, "Wall clock"): record timestamps are
not clamped to be non-decreasing (neither Kafka's LogAppendTime nor Iggy clamps); retention
judges a sealed segment by its *largest* timestamp against the wall clock, as Kafka does,
so a backward jump only keeps data longer and a forward jump of J deletes up to J early.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.inmemory import InMemoryBroker

T0_US = 1_700_000_000_000_000  # a wall-clock start, µs since the epoch
DAY_S = 86_400.0
HOUR_S = 3_600.0


class WallClock:
    """A settable wall clock in µs: it moves with the reactor clock it follows, plus the
    jumps the test makes (``jump(seconds)``, negative for backwards)."""

    def __init__(self, start_us: int = T0_US) -> None:
        self.offset_us = start_us
        self.clock: Any = None

    def follow(self, clock: Any) -> None:
        self.offset_us -= round(clock.seconds() * 1_000_000)
        self.clock = clock

    def jump(self, seconds: float) -> None:
        self.offset_us += round(seconds * 1_000_000)

    def __call__(self) -> int:
        elapsed = 0 if self.clock is None else round(self.clock.seconds() * 1_000_000)
        return self.offset_us + elapsed


def _broker(data: Path, wall: WallClock, **config: Any) -> InMemoryBroker:
    h = InMemoryBroker(data, now_us=wall, **config)
    wall.follow(h.clock)
    return h


def _ok(h: InMemoryBroker, proto: Any, tr: Any, line: str) -> str:
    (reply,) = h.request(proto, tr, line)
    text = reply.decode()
    assert "|OK" in text, (line, text)
    return text


def _generation(reply: str) -> int:
    match = re.search(r"generation=(\d+)", reply)
    assert match is not None, reply
    return int(match.group(1))


class GroupSessionTests:
    def test_wall_jumps_never_evict_heartbeating_members(self, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        """Two members heartbeating every 3 s of reactor time stay in the group, in the same
        generation, while the wall clock jumps a day forward, a day back, a year forward and
        back again between heartbeats; a member that stops heartbeating is evicted exactly
        one session timeout (10 s) of reactor time after its last heartbeat, although the
        wall clock was set back a day in between."""
        wall = WallClock()
        monkeypatch.setattr(time, "time", lambda: wall() / 1e6)
        monkeypatch.setattr(time, "time_ns", lambda: wall() * 1000)
        h = _broker(tmp_path / "data", wall, topics={"t": {"partitions": 4}},
                    groups={"session_timeout_ms": 10_000}, storage={"fsync": "never"})
        proto, tr = h.connect()
        _ok(h, proto, tr, "V1|1|JOIN|g t c1")
        generation = _generation(_ok(h, proto, tr, "V1|2|JOIN|g t c2"))
        assert _generation(_ok(h, proto, tr, "V1|3|JOIN|g t c1")) == generation
        jumps = [DAY_S, -DAY_S, 365 * DAY_S, -365 * DAY_S, -DAY_S, 7 * DAY_S, -30.0, 30.0]
        for i, jump in enumerate(jumps * 3):
            wall.jump(jump)
            h.clock.advance(3.0)
            for member in ("c1", "c2"):
                assert _ok(h, proto, tr, f"V1|h{i}{member}|HEARTBEAT|g t {member} "
                                          f"{generation}").endswith("heartbeat=ok")
        described = _ok(h, proto, tr, "V1|4|DESCRIBE_GROUP|g t")
        assert _generation(described) == generation
        assert "c1:" in described and "c2:" in described
        # c2 goes silent; c1 keeps heartbeating; the wall clock goes back a day meanwhile.
        for i in range(3):
            h.clock.advance(3.0)
            wall.jump(-DAY_S if i == 0 else 0.0)
            _ok(h, proto, tr, f"V1|s{i}|HEARTBEAT|g t c1 {generation}")
        h.clock.advance(0.9)  # 9.9 s since c2's last heartbeat
        assert "c2:" in _ok(h, proto, tr, "V1|5|DESCRIBE_GROUP|g t")
        h.clock.advance(0.2)  # 10.1 s
        h.settle()
        described = _ok(h, proto, tr, "V1|6|DESCRIBE_GROUP|g t")
        assert "c2:" not in described and _generation(described) == generation + 1
        h.close()

    def test_idle_connections_are_timed_on_the_reactor_clock(self, tmp_path: Path) -> None:
        """A silent connection is closed after limits.idle_timeout_ms of reactor time: a
        forward wall jump of a day does not close it early, a backward one does not keep
        it open longer."""
        wall = WallClock()
        h = _broker(tmp_path / "data", wall, limits={"idle_timeout_ms": 5000},
                    storage={"fsync": "never"})
        early, early_tr = h.connect()
        wall.jump(DAY_S)
        h.clock.advance(4.9)
        assert not early_tr.disconnecting
        late, late_tr = h.connect()
        wall.jump(-2 * DAY_S)
        h.clock.advance(0.2)
        assert early_tr.disconnecting and not late_tr.disconnecting
        h.clock.advance(4.8)
        assert late_tr.disconnecting
        h.close()


def _produce(h: InMemoryBroker, proto: Any, tr: Any, cid: str, value: str) -> int:
    reply = _ok(h, proto, tr, f"V1|{cid}|PRODUCE|t k:{value}")
    match = re.search(r"offset=(\d+)", reply)
    assert match is not None
    return int(match.group(1))


class RetentionTests:
    RETENTION_S = HOUR_S

    def _setup(self, tmp_path: Path) -> tuple[InMemoryBroker, WallClock, Any, Any]:
        wall = WallClock()
        h = _broker(tmp_path / "data", wall, storage={"fsync": "never", "segment_bytes": 4096},
                    topics={"t": {"partitions": 1,
                                  "retention_ms": int(self.RETENTION_S * 1000)}})
        proto, tr = h.connect()
        return h, wall, proto, tr

    def test_backward_jump_never_deletes_a_segment_early(self, tmp_path: Path) -> None:
        """Thirty records, a one-day backward jump, thirty more (now with smaller
        timestamps), then three hours of reactor time with a retention pass every minute:
        no record is deleted before it has really (by the reactor's clock) been kept
        retention_ms; data written before the jump is kept until the wall clock passes its
        timestamps again, then every sealed segment goes and the active one stays."""
        h, wall, proto, tr = self._setup(tmp_path)
        plog = h.broker.core.store.partition("t", 0)
        written_at: dict[int, float] = {}
        for i in range(60):
            if i == 30:
                wall.jump(-DAY_S)
            written_at[_produce(h, proto, tr, f"p{i}", f"{i}-{'x' * 500}")] = h.clock.seconds()
            h.clock.advance(1.0)
        assert plog.segment_count > 4
        for _ in range(180):  # three hours, one retention pass a minute
            h.clock.advance(60.0)
            for offset in range(plog.first_offset):
                assert h.clock.seconds() - written_at[offset] >= self.RETENTION_S
        # Three hours on, the wall clock is still a day behind the first records: the first
        # segment's newest timestamp is in the future, so nothing was deleted at all.
        assert plog.first_offset == 0
        wall.jump(DAY_S)
        h.clock.advance(60.0)
        assert plog.segment_count == 1 and plog.first_offset > 0
        for offset in range(plog.first_offset):
            assert h.clock.seconds() - written_at[offset] >= self.RETENTION_S
        h.close()

    def test_forward_jump_deletes_by_the_largest_timestamp_like_kafka(self,
                                                                      tmp_path: Path) -> None:
        """A two-hour forward jump (retention_ms is one hour) makes the next retention pass
        delete every sealed segment although its records are a minute old: a sealed segment
        goes once the wall clock is retention_ms past its largest timestamp, exactly as
        Kafka's time retention does. Records written after the jump, and the active
        segment, stay."""
        h, wall, proto, tr = self._setup(tmp_path)
        plog = h.broker.core.store.partition("t", 0)
        for i in range(30):
            _produce(h, proto, tr, f"p{i}", f"{i}-{'x' * 500}")
            h.clock.advance(1.0)
        sealed_end = plog._active.base_offset
        assert sealed_end > 0
        h.clock.advance(59.0)  # one retention pass at 60 s: nothing is an hour old
        assert plog.first_offset == 0
        wall.jump(2 * HOUR_S)
        after = [_produce(h, proto, tr, f"q{i}", f"after-{i}") for i in range(3)]
        h.clock.advance(60.0)
        assert plog.first_offset == sealed_end
        records = plog.read(plog.first_offset).records
        assert [r.offset for r in records][-3:] == after
        assert all(wall() - r.timestamp <= self.RETENTION_S * 1e6 for r in records
                   if r.offset in after)
        h.close()


class TimestampLookupTests:
    def test_offsets_ts_is_the_first_offset_at_or_after_ts_across_jumps(self,
                                                                          tmp_path: Path) -> None:
        """Records written while the wall clock jumps forward and back (several per ms, some
        in the same ms, over 4 KiB segments so the time index spans many segments):
        `OFFSETS t 0 ts=<ms>` answers, for every timestamp written, one ms either side and
        beyond both ends, the first offset whose record timestamp is >= ts, or -1; the same
        after a restart, when the time indexes come from disk."""
        wall = WallClock()
        data = tmp_path / "data"
        config: dict[str, Any] = {"storage": {"fsync": "never", "segment_bytes": 4096},
                                  "topics": {"t": {"partitions": 1}}}
        h = _broker(data, wall, **config)
        proto, tr = h.connect()
        steps = [0.0, 0.0004, 0.001, 2.0, -DAY_S, 0.5, 0.0, HOUR_S, 0.001, -30.0, -0.0002,
                 DAY_S, -HOUR_S, 0.0, 10.0, -10.0, 0.0003]
        for i, step in enumerate(steps * 4):
            wall.jump(step)
            _produce(h, proto, tr, f"p{i}", f"{i}-{'y' * 300}")
        plog = h.broker.core.store.partition("t", 0)
        assert plog.segment_count > 3
        stamps = [r.timestamp for r in plog.read(0, max_messages=10_000).records]
        assert len(stamps) == len(steps) * 4
        assert any(b < a for a, b in zip(stamps, stamps[1:], strict=False))  # not sorted
        queries = sorted({q for ts in stamps
                          for q in (ts // 1000 - 1, ts // 1000, ts // 1000 + 1)}
                         | {min(stamps) // 1000 - 5, max(stamps) // 1000 + 5})

        def expected(ms: int) -> int:
            return next((o for o, ts in enumerate(stamps) if ts >= ms * 1000), -1)

        def check(broker: InMemoryBroker) -> None:
            p, t = broker.connect()
            for i, ms in enumerate(queries):
                reply = _ok(broker, p, t, f"V1|q{i}|OFFSETS|t 0 ts={ms}")
                assert reply.endswith(f" offset={expected(ms)}"), (ms, reply)

        check(h)
        h.close()
        restarted = _broker(data, WallClock(), **config)
        check(restarted)
        restarted.close()
