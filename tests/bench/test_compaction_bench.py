"""The CI-sized run of ``bench/compaction.py``: many records on few keys shrink to about
one record per key plus the active segment, and a load from offset 0 sees every key's
latest value (the bench asserts that itself)."""

from __future__ import annotations

from bench.compaction import run


def test_many_records_on_few_keys_become_small() -> None:
    """100,000 records on 100 keys: the cleaned partition is at least 5x smaller."""
    result = run(100_000, 100, 32)
    assert result["after"] * 5 < result["before"], result
