"""The storage package's own exceptions about its data directory.

Owns: ``DataDirError`` and its kinds: the directory is a file, or another process holds its
lock. Plain classes in the store's words, with no wire code: the broker shell turns them into
one line for the operator.

Must not import: Twisted, anything of the broker.
"""

from __future__ import annotations

__all__ = ["DataDirError", "DataDirIsAFile", "DataDirLocked"]


class DataDirError(Exception):
    """The data directory cannot be used; ``str(error)`` says why in one line."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


class DataDirIsAFile(DataDirError):
    """``path`` (or ``file``, one of its parents) is a regular file, not a directory."""

    def __init__(self, path: str, file: str) -> None:
        if file == path:
            message = f"data directory {path} is a file, not a directory"
        else:
            message = f"data directory {path} cannot be created: {file} is a file, not a directory"
        super().__init__(path, message)
        self.file = file


class DataDirLocked(DataDirError):
    """Another process holds the lock of the data directory ``path``.

    ``pid`` is what the holder wrote into the lock file, or None when it has not written it
    yet (it is between taking the lock and writing its pid)."""

    def __init__(self, path: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(path, f"data directory {path} is locked by {holder}: another "
                               f"broker is using it")
        self.pid = pid
