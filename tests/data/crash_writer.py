"""Child process of test_crash.py: appends deterministic records to ``<root>`` forever and
prints ``ack <first> <count>`` for each batch only after ``sync()`` returned.

Run as ``python tests/data/crash_writer.py <root>`` (the repository on ``PYTHONPATH``).
Record contents are a pure function of the offset (and the batch's first offset, which
gives the timestamp), so the parent can rebuild the exact bytes of every acknowledged
record; ``expected_bytes`` is that function.
"""

from __future__ import annotations

import sys

from data import format as fmt
from data.store import StorageConfig, Store, TopicConfig

T0 = 1_700_000_000_000_000
CONFIG = StorageConfig(segment_bytes=16_384, fsync="always")


def payload_for(offset: int) -> bytes:
    return (b"%d|" % offset) * (1 + offset % 37)


def headers_for(offset: int) -> bytes:
    return fmt.key_header(b"key-%d" % (offset % 5)) if offset % 3 else b""


def id_for(offset: int) -> int:
    return (offset * 0x9E3779B97F4A7C15 + 1) % (1 << 128)


def batch_size(first: int) -> int:
    return 1 + (first * 7) % 13


def expected_bytes(offset: int, batch_first: int) -> bytes:
    """The on-disk bytes of record ``offset`` appended in a batch starting at ``batch_first``."""
    return fmt.encode_record(
        offset, T0 + 10 * batch_first, id_for(offset), offset, payload_for(offset), headers_for(offset)
    )


def main(root: str) -> None:
    holder: list = []
    store = Store(root, CONFIG, now_us=lambda: T0 + 10 * holder[0].next_offset)
    if store.topic("c") is None:
        store.create_topic("c", TopicConfig(partitions=1))
    plog = store.partition("c", 0)
    holder.append(plog)
    print(f"ready {plog.next_offset}", flush=True)
    while True:
        first = plog.next_offset
        offsets = range(first, first + batch_size(first))
        plog.append(
            [payload_for(o) for o in offsets],
            [headers_for(o) for o in offsets],
            ids=[id_for(o) for o in offsets],
            origin_timestamps=list(offsets),
        )
        plog.sync()
        print(f"ack {first} {len(offsets)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
