"""File layers for tests: one that records every write and fsync, one that injects faults.

Owns: ``RecordingFileLayer`` (every call that changes or syncs a file, with a global
sequence number, the fd and the path the fd was opened for) and ``FaultyFileLayer`` (fails
the Nth matching write/fsync/open/... with ENOSPC, EIO or any errno, optionally after
writing part of the data, as a full disk does). Both wrap a real layer (``OS_FS`` by
default), so the bytes really land on ``tmp_path`` and the store can be reopened after.

Thread-safe: the store's group committer calls ``fsync`` from a worker thread.

Must not import: Twisted, the broker. Used by tests only.
"""

from __future__ import annotations

import errno as errno_codes
import os
import threading
from dataclasses import dataclass

from data.fs import OS_FS, FileLayer

__all__ = ["FsEvent", "RecordingFileLayer", "FaultyFileLayer", "GatedFileLayer", "NoSyncFileLayer"]


class _Wrapping:
    """Delegates to ``inner`` and remembers which path each open fd belongs to."""

    def __init__(self, inner: FileLayer = OS_FS) -> None:
        self.inner = inner
        self.fd_paths: dict[int, str] = {}
        self._mutex = threading.Lock()

    def _path(self, fd: int) -> str:
        return self.fd_paths.get(fd, f"<unknown fd {fd}>")

    # Hooks for subclasses: called before each operation with (op, fd or None, path).
    def _before(self, op: str, fd: int | None, path: str, data: bytes | bytearray | memoryview | None = None) -> None:
        return None

    def _after(self, op: str, fd: int | None, path: str, result: object = None) -> None:
        return None

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self._before("open", None, path)
        fd = self.inner.open(path, flags, mode)
        with self._mutex:
            self.fd_paths[fd] = path
        self._after("open", fd, path, flags)
        return fd

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        path = self._path(fd)
        self._before("write", fd, path, data)
        n = self.inner.write(fd, data)
        self._after("write", fd, path, n)
        return n

    def pread(self, fd: int, length: int, offset: int) -> bytes:
        self._before("pread", fd, self._path(fd))
        return self.inner.pread(fd, length, offset)

    def fsync(self, fd: int) -> None:
        path = self._path(fd)
        self._before("fsync", fd, path)
        self.inner.fsync(fd)
        self._after("fsync", fd, path)

    def ftruncate(self, fd: int, length: int) -> None:
        path = self._path(fd)
        self._before("ftruncate", fd, path)
        self.inner.ftruncate(fd, length)
        self._after("ftruncate", fd, path, length)

    def lseek(self, fd: int, pos: int, how: int) -> int:
        return self.inner.lseek(fd, pos, how)

    def fstat_size(self, fd: int) -> int:
        return self.inner.fstat_size(fd)

    def close(self, fd: int) -> None:
        path = self._path(fd)
        self._before("close", fd, path)
        with self._mutex:
            self.fd_paths.pop(fd, None)
        self.inner.close(fd)
        self._after("close", fd, path)

    def fsync_dir(self, path: str) -> None:
        self._before("fsync_dir", None, path)
        self.inner.fsync_dir(path)
        self._after("fsync_dir", None, path)

    def replace(self, src: str, dst: str) -> None:
        self._before("replace", None, src)
        self.inner.replace(src, dst)
        self._after("replace", None, src, dst)

    def remove(self, path: str) -> None:
        self._before("remove", None, path)
        self.inner.remove(path)
        self._after("remove", None, path)

    def rmtree(self, path: str) -> None:
        self._before("rmtree", None, path)
        self.inner.rmtree(path)
        self._after("rmtree", None, path)

    def makedirs(self, path: str) -> None:
        self.inner.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def getsize(self, path: str) -> int:
        return self.inner.getsize(path)


@dataclass(frozen=True)
class FsEvent:
    """One recorded call: ``seq`` orders all calls across fds and threads."""

    seq: int
    op: str
    fd: int | None
    path: str
    nbytes: int = 0
    flags: int = 0


class RecordingFileLayer(_Wrapping):
    """Records opens, writes (with byte counts), fsyncs, truncations, closes, renames and
    removals, each with a global sequence number, the fd and its path.

    ``fsync_of_closed_fd`` counts fsyncs on an fd this layer did not have open at the time
    (a sync racing with a close would show up here)."""

    def __init__(self, inner: FileLayer = OS_FS) -> None:
        super().__init__(inner)
        self.events: list[FsEvent] = []
        self.fsync_of_closed_fd = 0
        self._seq = 0

    def _record(self, op: str, fd: int | None, path: str, nbytes: int = 0, flags: int = 0) -> None:
        with self._mutex:
            self._seq += 1
            self.events.append(FsEvent(self._seq, op, fd, path, nbytes, flags))

    def _before(self, op: str, fd: int | None, path: str, data: bytes | bytearray | memoryview | None = None) -> None:
        if op == "fsync" and fd is not None:
            with self._mutex:
                if fd not in self.fd_paths:
                    self.fsync_of_closed_fd += 1

    def _after(self, op: str, fd: int | None, path: str, result: object = None) -> None:
        if op in ("write", "ftruncate"):
            self._record(op, fd, path, int(result))  # type: ignore[arg-type]
        elif op == "open":
            self._record(op, fd, path, flags=int(result))  # type: ignore[arg-type]
        elif op != "pread":
            self._record(op, fd, path)

    def ops(self, op: str, path_contains: str = "") -> list[FsEvent]:
        """The recorded events of one kind whose path contains ``path_contains``."""
        with self._mutex:
            return [e for e in self.events if e.op == op and path_contains in e.path]


class FaultyFileLayer(_Wrapping):
    """Fails the ``nth`` call of ``op`` whose path contains ``path_contains`` (and ends with
    ``path_endswith``, when given: ``".log"`` picks the log files of a partition directory).

    ``error`` is the errno (ENOSPC by default). ``partial=True`` makes a failing write put
    half of its data on disk first, as a filling disk does. ``sticky=True`` keeps failing
    every later matching call too. ``calls`` counts matching calls (failed ones included),
    so a test can assert that a failed fsync is never retried.
    """

    def __init__(
        self,
        inner: FileLayer = OS_FS,
        *,
        op: str = "write",
        nth: int = 1,
        path_contains: str = "",
        error: int = errno_codes.ENOSPC,
        partial: bool = False,
        sticky: bool = False,
        armed: bool = True,
        path_endswith: str = "",
    ) -> None:
        super().__init__(inner)
        self.op = op
        self.nth = nth
        self.path_contains = path_contains
        self.path_endswith = path_endswith
        self.error = error
        self.partial = partial
        self.sticky = sticky
        self.armed = armed
        self.calls = 0
        self.failures = 0

    def arm(self, op: str, nth: int = 1, path_contains: str = "", error: int = errno_codes.ENOSPC, *, partial: bool = False, sticky: bool = False, path_endswith: str = "") -> None:
        """(Re)arm: count matching calls from zero again."""
        with self._mutex:
            self.op, self.nth, self.path_contains, self.error = op, nth, path_contains, error
            self.path_endswith = path_endswith
            self.partial, self.sticky, self.armed = partial, sticky, True
            self.calls = 0

    def _before(self, op: str, fd: int | None, path: str, data: bytes | bytearray | memoryview | None = None) -> None:
        with self._mutex:
            if not self.armed or op != self.op or self.path_contains not in path \
                    or not path.endswith(self.path_endswith):
                return
            self.calls += 1
            fail = self.calls == self.nth or (self.sticky and self.calls > self.nth)
            if not fail:
                return
            self.failures += 1
        if op == "write" and self.partial and data is not None and fd is not None and len(data) > 1:
            self.inner.write(fd, memoryview(data)[: len(data) // 2])
        raise OSError(self.error, os.strerror(self.error), path)


class GatedFileLayer(RecordingFileLayer):
    """A recording layer whose ``fsync`` on matching paths, called from any thread but the
    one that built the layer (the test's own), waits at a gate.

    The test opens the gate when it wants (``release()``), so it can do things on its own
    thread while a sync is provably inside ``fsync``. ``entered`` is set when a gated fsync
    is waiting. ``closed_during_fsync`` counts fsyncs whose fd was closed (or reused for
    another file) while they waited: the hazard the store must avoid.
    """

    def __init__(self, inner: FileLayer = OS_FS, *, path_contains: str = "", timeout: float = 30.0) -> None:
        super().__init__(inner)
        self.gate_path = path_contains
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.closed_during_fsync = 0
        self.timeout = timeout
        self.gated = True
        self._owner = threading.get_ident()

    def release(self) -> None:
        self.gated = False
        self.gate.set()

    def close_gate(self) -> None:
        """Gate the next matching fsyncs again."""
        self.gate.clear()
        self.entered.clear()
        self.gated = True

    def fsync(self, fd: int) -> None:
        path = self._path(fd)
        if self.gated and self.gate_path in path and threading.get_ident() != self._owner:
            self.entered.set()
            if not self.gate.wait(self.timeout):
                raise TimeoutError("gate never released")
            with self._mutex:
                if self.fd_paths.get(fd) != path:
                    self.closed_during_fsync += 1
        super().fsync(fd)


class NoSyncFileLayer(_Wrapping):
    """The real file system with ``fsync``/``fsync_dir`` turned into no-ops.

    For tests about *content* (what recovery keeps, what reads return) that reopen stores
    many times in one process: the page cache holds every write either way, and skipping
    the fsyncs keeps hundreds of examples fast. Durability itself is tested elsewhere, with
    real fsyncs.
    """

    def fsync(self, fd: int) -> None:
        return None

    def fsync_dir(self, path: str) -> None:
        return None
