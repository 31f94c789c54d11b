"""The file layer: every byte Skerry puts on disk goes through one of these objects.

Owns: the small set of file-system calls the store, the group coordinator's JSON files and
the replication state use (fd-based, like ``os``), so that tests can swap in a layer that
records what was fsynced (power-cut simulation) or injects ENOSPC/EIO/failed fsyncs.

Must not import: Twisted, anything of the broker. ``OS_FS`` is the real layer: its methods
are the ``os`` functions themselves, so the hot path pays no extra Python call.
"""

from __future__ import annotations

import os
import shutil
from typing import Protocol, runtime_checkable

__all__ = ["FileLayer", "OsFileLayer", "OS_FS"]


@runtime_checkable
class FileLayer(Protocol):
    """What the store needs from a file system. Paths are ``str``; files are int fds."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int: ...
    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int: ...
    def pread(self, fd: int, length: int, offset: int) -> bytes: ...
    def fsync(self, fd: int) -> None: ...
    def ftruncate(self, fd: int, length: int) -> None: ...
    def lseek(self, fd: int, pos: int, how: int) -> int: ...
    def fstat_size(self, fd: int) -> int: ...
    def close(self, fd: int) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def replace(self, src: str, dst: str) -> None: ...
    def remove(self, path: str) -> None: ...
    def rmtree(self, path: str) -> None: ...
    def makedirs(self, path: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def getsize(self, path: str) -> int: ...


class OsFileLayer:
    """The real file system. Methods are bound straight to ``os`` where possible."""

    open = staticmethod(os.open)
    write = staticmethod(os.write)
    pread = staticmethod(os.pread)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)
    lseek = staticmethod(os.lseek)
    close = staticmethod(os.close)
    replace = staticmethod(os.replace)
    remove = staticmethod(os.remove)
    listdir = staticmethod(os.listdir)
    exists = staticmethod(os.path.exists)
    getsize = staticmethod(os.path.getsize)

    @staticmethod
    def fstat_size(fd: int) -> int:
        return os.fstat(fd).st_size

    @staticmethod
    def fsync_dir(path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def rmtree(path: str) -> None:
        shutil.rmtree(path)

    @staticmethod
    def makedirs(path: str) -> None:
        os.makedirs(path, exist_ok=True)


OS_FS: FileLayer = OsFileLayer()
