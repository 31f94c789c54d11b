"""Offset logic of the ``skerry`` source, pure and Spark-free (unit-testable).

Owns: parsing ``startingOffsets``/``endingOffsets`` (``earliest``, ``latest`` or Kafka's JSON
``{"orders": {"0": 23, "1": -2}}`` with -2 earliest, -1 latest), resolving them against
what a broker holds, splitting offset ranges into Spark partitions, and admission control
(``maxOffsetsPerTrigger`` spread over partitions in proportion to what each has waiting).

Must not import: Twisted, the broker, pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["EARLIEST", "LATEST", "OffsetRange", "DataLoss", "parse_spec", "resolve", "split_ranges",
           "split_min_partitions",
           "rate_limit", "to_json_offsets", "from_json_offsets"]

EARLIEST = -2
LATEST = -1

TopicOffsets = dict[str, dict[int, int]]


class DataLoss(RuntimeError):
    """Offsets asked for are no longer retained (raised when failOnDataLoss is true)."""


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int


def parse_spec(text: str | None, default: str) -> str | dict[str, dict[int, int]]:
    """``"earliest"``, ``"latest"`` or ``{topic: {partition: offset}}`` from an option value."""
    value = (text or default).strip()
    if value in ("earliest", "latest"):
        return value
    try:
        raw = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"offsets must be earliest, latest or JSON like "
                         f'{{"orders": {{"0": 23}}}}, got {value!r}') from exc
    if not isinstance(raw, dict):
        raise ValueError(f"offsets JSON must be an object of topics, got {value!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise ValueError(f"offsets of topic {topic} must be an object of partitions")
        out[topic] = {int(p): int(o) for p, o in parts.items()}
        for offset in out[topic].values():
            if offset < EARLIEST:
                raise ValueError(f"offset {offset} is not -2 (earliest), -1 (latest) or >= 0")
    return out


def resolve(spec: str | Mapping[str, Mapping[int, int]], topic: str, partition: int, earliest: int,
            latest: int, fail_on_data_loss: bool, default: int) -> int:
    """The concrete offset ``spec`` names for one partition (``default`` when JSON omits it).

    An offset below ``earliest`` is data loss: ``DataLoss`` or, when allowed, ``earliest``.
    An offset above ``latest`` is clamped to ``latest``.
    """
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    assert not isinstance(spec, str)
    wanted = spec.get(topic, {}).get(partition, default)
    if wanted == EARLIEST:
        return earliest
    if wanted == LATEST:
        return latest
    if wanted < earliest:
        if fail_on_data_loss:
            raise DataLoss(f"{topic}/{partition}: offset {wanted} is no longer retained (earliest is "
                           f"{earliest}); set failOnDataLoss=false to start from {earliest}")
        return earliest
    return min(wanted, latest)


def split_ranges(ranges: list[OffsetRange], max_records: int | None) -> list[OffsetRange]:
    """Each non-empty range, cut into pieces of at most ``max_records`` offsets."""
    out: list[OffsetRange] = []
    for r in ranges:
        if r.end <= r.start:
            continue
        step = max_records if max_records and max_records > 0 else r.end - r.start
        for start in range(r.start, r.end, step):
            out.append(OffsetRange(r.topic, r.partition, start, min(r.end, start + step)))
    return out


def split_min_partitions(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Kafka's ``minPartitions``: when there are fewer ranges than asked for, cut each range
    into ``round(size / total * min_partitions)`` (at least one) nearly equal pieces."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.end - r.start for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        size = r.end - r.start
        parts = max(round(size / total * min_partitions), 1) if total else 1
        start, remaining = r.start, size
        for part in range(parts):
            take = remaining // (parts - part)
            remaining -= take
            if take:
                out.append(OffsetRange(r.topic, r.partition, start, start + take))
            start += take
    return out


def rate_limit(start: TopicOffsets, latest: TopicOffsets, limit: int | None) -> TopicOffsets:
    """The end offsets of the next micro-batch: ``latest``, or at most ``limit`` offsets in
    all, shared among partitions in proportion to what each has waiting (Kafka's rule; every
    partition with something waiting gets at least one, the remainder goes to the first ones)."""
    if limit is None:
        return {t: dict(p) for t, p in latest.items()}
    waiting = {(t, p): max(0, latest[t][p] - start.get(t, {}).get(p, latest[t][p]))
               for t in latest for p in latest[t]}
    total = sum(waiting.values())
    out = {t: {p: start.get(t, {}).get(p, latest[t][p]) for p in latest[t]} for t in latest}
    if total <= limit:
        return {t: dict(p) for t, p in latest.items()}
    budget = limit
    shares: dict[tuple[str, int], int] = {}
    for key in sorted(waiting):
        share = waiting[key] * limit // total
        shares[key] = min(share, waiting[key])
        budget -= shares[key]
    for key in sorted(waiting):
        if budget <= 0:
            break
        extra = min(waiting[key] - shares[key], budget)
        shares[key] += extra
        budget -= extra
    for (t, p), share in shares.items():
        out[t][p] += share
    return out


def to_json_offsets(offsets: TopicOffsets) -> dict[str, dict[str, int]]:
    """The checkpoint form (JSON keys are strings)."""
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def from_json_offsets(raw: Mapping[str, Mapping[str, int]]) -> TopicOffsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
