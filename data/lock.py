"""The data directory's lock: one process at a time opens a data directory.

Owns: creating the data directory and taking an exclusive, non-blocking ``flock`` on
``<root>/.lock`` (``data.paths.lock_path``), as Kafka locks each log directory. The holder
writes its pid into the file after locking, for the message of whoever is refused. The
kernel drops the lock when the holder's last fd to it closes, so a ``kill -9`` or a power
cut never leaves a stale lock behind: the pid in the file is only a hint, the lock is what
counts. The file is never removed (unlinking a lock file lets two processes each lock a
different inode). A data directory path that is a regular file is refused as such.

The lock is taken with ``os`` directly, not through ``data.fs``: it is not data, and a test
file layer must not be able to fake it.

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

import fcntl
import os

from data import paths
from data.errors import DataDirIsAFile, DataDirLocked

__all__ = ["DataDirLock"]


class DataDirLock:
    """An exclusive lock on a data directory, held until ``release`` or the process ends."""

    def __init__(self, root: str, fd: int) -> None:
        self.root = root
        self.path = paths.lock_path(root)
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, root: str) -> DataDirLock:
        """Create ``root`` if needed and lock it. ``DataDirIsAFile`` when ``root`` or one of
        its parents is a file; ``DataDirLocked`` when another holder has it (in this process
        too: two stores on one directory are refused alike); ``OSError`` otherwise."""
        try:
            os.makedirs(root, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            file = _first_file(root)
            if file is None:
                raise
            raise DataDirIsAFile(os.path.abspath(root), file) from None
        fd = os.open(paths.lock_path(root), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise DataDirLocked(os.path.abspath(root), pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)  # drops the lock
            raise
        return cls(root, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (closing the fd releases it); idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _first_file(path: str) -> str | None:
    """The path itself or its nearest existing parent, when that is a regular file."""
    current = os.path.abspath(path)
    while True:
        if os.path.lexists(current):
            return current if os.path.isfile(current) else None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
