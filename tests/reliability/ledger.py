"""The ack ledger: what the broker acknowledged, checked against what it gives back.

Owns: ``AckLedger`` (record every acknowledged ``(topic, partition, offset, value)``; values
are unique per test run) and ``LedgerReport`` (after the fault: lost, duplicated,
reordered and corrupted messages, and reads above the high watermark), in the spirit of
Kafka's system-test ack ledgers and Jepsen's queue checker. Acknowledged means the client
saw ``OK``; an unacknowledged message may or may not survive, but if it does it must be
whole and appear once.

Must not import: Twisted, the broker. Pure bookkeeping, shared by tests/reliability and
bench/reliability.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["AckLedger", "LedgerReport"]

Key = tuple[str, int]


@dataclass
class LedgerReport:
    """The outcome of one check; ``ok`` when nothing acknowledged went wrong."""

    acknowledged: int = 0
    read: int = 0
    lost: list[tuple[str, int, int, bytes]] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    reordered: list[tuple[str, int, int]] = field(default_factory=list)
    corrupted: list[tuple[str, int, int]] = field(default_factory=list)
    above_hw: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.corrupted
                    or self.above_hw)

    def summary(self) -> str:
        return (f"acked={self.acknowledged} read={self.read} lost={len(self.lost)} "
                f"dup={len(self.duplicated)} reordered={len(self.reordered)} "
                f"corrupted={len(self.corrupted)} above_hw={len(self.above_hw)}")


class AckLedger:
    """Acknowledged messages, by partition, and every value ever sent (acked or not)."""

    def __init__(self) -> None:
        self.acked: dict[Key, dict[int, bytes]] = {}
        self.sent: set[bytes] = set()

    def sent_value(self, value: bytes) -> None:
        """A value went out (it may be stored even without an ack)."""
        self.sent.add(value)

    def ack(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        """The broker answered OK for ``value`` at ``offset``."""
        self.sent.add(value)
        self.acked.setdefault((topic, partition), {})[offset] = value

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def check(self, read_back: dict[Key, Iterable[tuple[int, bytes]]],
              hw: dict[Key, int] | None = None) -> LedgerReport:
        """Compare with everything read back per partition, ``(offset, value)`` in read
        order; ``hw`` (last readable offset per partition) flags reads above it."""
        report = LedgerReport(acknowledged=self.count)
        seen: dict[bytes, int] = {}
        for key in set(read_back) | set(self.acked):
            records = list(read_back.get(key, ()))
            report.read += len(records)
            by_offset: dict[int, bytes] = {}
            last = -1
            for offset, value in records:
                if offset <= last:
                    report.reordered.append((key[0], key[1], offset))
                last = offset
                by_offset[offset] = value
                seen[value] = seen.get(value, 0) + 1
                if value not in self.sent:
                    report.corrupted.append((key[0], key[1], offset))
                if hw is not None and key in hw and offset > hw[key]:
                    report.above_hw.append((key[0], key[1], offset))
            for offset, value in sorted(self.acked.get(key, {}).items()):
                got = by_offset.get(offset)
                if got is None:
                    report.lost.append((key[0], key[1], offset, value))
                elif got != value:
                    report.corrupted.append((key[0], key[1], offset))
        report.duplicated = sorted(v for v, n in seen.items() if n > 1)
        return report
