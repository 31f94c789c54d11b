"""The storage package's own exceptions about its data directory.

Owns: ``DataDirError`` and its kinds: another process holds the directory's lock. Plain
classes in the store's words, with no wire code: the broker shell turns them into one line
for the operator.

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

__all__ = ["DataDirError", "DataDirLocked"]


class DataDirError(Exception):
    """The data directory cannot be used; ``str(error)`` says why in one line."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


class DataDirLocked(DataDirError):
    """Another process holds the lock of the data directory ``path``.

    ``pid`` is what the holder wrote into the lock file, or None when it has not written it
    yet (it is between taking the lock and writing its pid)."""

    def __init__(self, path: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(path, f"data directory {path} is locked by {holder}: another "
                               f"broker is using it")
        self.pid = pid
