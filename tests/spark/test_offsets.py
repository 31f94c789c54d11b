"""Pure offset logic of the skerry source: specs, ranges, admission control."""

from __future__ import annotations

import pytest

from data.spark.offsets import (
    DataLoss,
    OffsetRange,
    parse_spec,
    rate_limit,
    resolve,
    split_min_partitions,
    split_ranges,
)


class OffsetSpecTests:
    def test_spec_forms(self) -> None:
        """earliest/latest words and Kafka's JSON (string partition keys) parse; junk is refused."""
        assert parse_spec(None, "latest") == "latest"
        assert parse_spec('{"o": {"0": 23, "1": -2}}', "latest") == {"o": {0: 23, 1: -2}}
        with pytest.raises(ValueError):
            parse_spec("yesterday", "latest")
        with pytest.raises(ValueError):
            parse_spec('{"o": {"0": -3}}', "latest")

    def test_resolve_clamps_and_reports_data_loss(self) -> None:
        """-2/-1 map to earliest/latest; beyond latest clamps; below earliest is data loss
        unless failOnDataLoss is off."""
        spec = {"o": {0: -2, 1: -1, 2: 99, 3: 1}}
        assert resolve(spec, "o", 0, 5, 50, True, -1) == 5
        assert resolve(spec, "o", 1, 5, 50, True, -2) == 50
        assert resolve(spec, "o", 2, 5, 50, True, -1) == 50
        assert resolve(spec, "o", 3, 5, 50, False, -1) == 5
        with pytest.raises(DataLoss):
            resolve(spec, "o", 3, 5, 50, True, -1)

    def test_split_ranges(self) -> None:
        """Ranges larger than maxRecordsPerPartition are cut; empty ones vanish."""
        got = split_ranges([OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 3, 3)], 4)
        assert [(r.start, r.end) for r in got] == [(0, 4), (4, 8), (8, 10)]

    def test_rate_limit_is_proportional_and_exact(self) -> None:
        """maxOffsetsPerTrigger is shared in proportion to what each partition has waiting and
        the total is exactly the limit."""
        end = rate_limit({"t": {0: 0, 1: 0}}, {"t": {0: 300, 1: 100}}, 200)
        assert end == {"t": {0: 150, 1: 50}}
        end = rate_limit({"t": {0: 10, 1: 0}}, {"t": {0: 13, 1: 4}}, 5)
        assert sum(end["t"][p] - s for p, s in {0: 10, 1: 0}.items()) == 5
        assert rate_limit({"t": {0: 0}}, {"t": {0: 3}}, 10) == {"t": {0: 3}}

    def test_min_partitions_splits_in_proportion(self) -> None:
        """minPartitions (Kafka's rule) cuts ranges in proportion to their size into nearly
        equal pieces that cover each range exactly; with enough ranges nothing changes."""
        ranges = [OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 10, 110)]
        got = split_min_partitions(ranges, 4)
        assert [(r.partition, r.start, r.end) for r in got] == [
            (0, 0, 100), (0, 100, 200), (0, 200, 300), (1, 10, 110)]
        assert split_min_partitions(ranges, 2) == ranges
        assert split_min_partitions(ranges, None) == ranges
