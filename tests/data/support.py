"""Helpers shared by the storage tests: a fake clock, unclean stops, file pokes."""

from __future__ import annotations

import os

from data import paths
from data.store import Store


class FakeClock:
    """A microsecond clock the test moves by hand (``now_us`` for the store)."""

    def __init__(self, start: int = 1_700_000_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, us: int) -> None:
        self.now += us


def stop_uncleanly(store: Store) -> None:
    """Drop a store the way a killed process does: fds closed, nothing fsynced on purpose,
    no clean-shutdown marker (the page cache still has every write, as after SIGKILL), and
    the data directory's lock dropped, as the kernel drops it with the process."""
    for topic in store.topics.values():
        for plog in topic.partitions:
            plog.close(sync=False)
    store.lock.release()


def partition_path(root: str, topic: str, partition: int) -> str:
    return paths.partition_dir(paths.topic_dir(root, topic), partition)


def segment_logs(root: str, topic: str, partition: int) -> list[str]:
    """The partition's ``.log`` files, oldest first."""
    pdir = partition_path(root, topic, partition)
    return [os.path.join(pdir, n) for n in sorted(os.listdir(pdir)) if n.endswith(paths.LOG_SUFFIX)]


def flip_byte(path: str, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))


def truncate_file(path: str, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def append_bytes(path: str, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
