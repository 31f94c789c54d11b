"""The sink's Arrow-to-PRODUCE_BATCH step, without Spark or a broker: the broker's key hash
over a whole column, rows grouped by partition in order, batches under the byte budget that
decode (with the broker's own decoder) to exactly the rows written."""

from __future__ import annotations

import pyarrow as pa
import pytest

from broker.client.codec import fnv1a_32
from broker.v1.codec import decode_batch
from data.spark.batches import fnv1a_32_column, requests


def decoded(batch: pa.RecordBatch, partitions: int, max_bytes: int) -> dict[int, list[tuple[bytes, bytes]]]:
    """``{partition: [(key, value), ...]}`` of every request, checking each against the budget."""
    out: dict[int, list[tuple[bytes, bytes]]] = {}
    for partition, data, count in requests(batch, partitions, max_bytes):
        keys, values = decode_batch(data, 1 << 20)
        assert len(keys) == count and (len(data) <= max_bytes or count == 1)
        out.setdefault(partition, []).extend(zip(keys, values, strict=True))
    return out


class BatchRequestTests:
    def test_hash_matches_the_broker(self) -> None:
        """The vectorised FNV-1a of a column equals the broker's hash of each key, for keys
        of every length up to 255 bytes and the empty key."""
        keys = [b"", b"a", b"user42", bytes(range(256))[:255], b"\x00\xff" * 9]
        assert fnv1a_32_column(pa.array(keys, pa.binary())).tolist() == [fnv1a_32(k) for k in keys]

    def test_rows_grouped_by_key_hash_in_order_within_budget(self) -> None:
        """Without a partition column each row goes where the broker's hash sends its key (a
        null key counts as no key); each partition's rows keep their order; every request
        stays within the byte budget; string columns travel as their UTF-8 bytes."""
        keys = [None if i % 7 == 0 else f"user{i % 13}" for i in range(500)]
        values = [f"v{i},|\n" for i in range(500)]
        batch = pa.RecordBatch.from_pydict({"key": pa.array(keys, pa.string()), "value": pa.array(values)})
        got = decoded(batch, 4, 300)
        want: dict[int, list[tuple[bytes, bytes]]] = {}
        for k, v in zip(keys, values, strict=True):
            kb = (k or "").encode()
            want.setdefault(fnv1a_32(kb) % 4, []).append((kb, v.encode()))
        assert got == want

    def test_partition_column_overrides_the_hash_where_set(self) -> None:
        """A partition column picks the partition; a null in it falls back to the key hash."""
        batch = pa.RecordBatch.from_pydict({
            "value": pa.array([b"a", b"b", b"c"]), "key": pa.array([b"x", b"y", b"z"]),
            "partition": pa.array([2, None, 0], pa.int32())})
        got = decoded(batch, 3, 1 << 20)
        assert got[2][0] == (b"x", b"a") and got[0][-1] == (b"z", b"c")
        assert (b"y", b"b") in got[fnv1a_32(b"y") % 3]

    def test_a_message_over_the_budget_travels_alone(self) -> None:
        """A value larger than the budget is sent as a batch of its own, not refused here."""
        batch = pa.RecordBatch.from_pydict({"value": pa.array([b"s", b"x" * 1000, b"t"])})
        sizes = [count for _p, _d, count in requests(batch, 1, 100)]
        assert sizes == [1, 1, 1]

    @pytest.mark.parametrize(("columns", "message"), [
        ({"key": pa.array([b"k"])}, "needs a value column"),
        ({"value": pa.array([b"v", None])}, "value must not be null"),
        ({"value": pa.array([b"v"]), "key": pa.array([b"k" * 256])}, "key is 256 bytes"),
        ({"value": pa.array([b"v"]), "partition": pa.array([5])}, "partition 5 out of range"),
        ({"value": pa.array([1])}, "value must be binary or string"),
    ])
    def test_unwritable_rows_are_refused(self, columns: dict[str, pa.Array], message: str) -> None:
        """Rows the broker could not store are refused before anything is sent."""
        with pytest.raises(ValueError, match=message):
            list(requests(pa.RecordBatch.from_pydict(columns), 3, 1000))
