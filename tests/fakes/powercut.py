"""A file layer that simulates a power cut: what was not fsynced is lost.

Owns: ``PowerCutFileLayer``. It wraps the real layer (bytes land on ``tmp_path``) and
remembers, per file, the length covered by its last fsync, and which directory entries
(created files, renames) were made durable by ``fsync_dir`` of their directory. ``cut()``
then does what losing power does to a file system that orders data before metadata:

* a file created since its directory was last fsynced disappears;
* a rename (``replace``) not yet followed by an fsync of its directory is undone: the target
  gets back its previous durable content (or disappears when it had none), and with
  ``renames_keep_source`` the file is back under its old name, as on a POSIX file system;
* every other file is cut to its fsynced length, optionally followed by a torn tail of
  random garbage no longer than what was lost (a sector half written).

Directories themselves (``makedirs``) are treated as durable, and a renamed directory
carries its files along. Files that existed before the layer saw them are durable as found.
After ``cut()`` the layer forgets everything, so the same object can keep serving the
reopened store (the next cut only loses what is written after it).

Must not import: Twisted, the broker. Used by tests and bench/reliability.py only.
"""

from __future__ import annotations

import os
import random
import threading

from data.fs import OS_FS, FileLayer

__all__ = ["PowerCutFileLayer", "PowerLost"]


class PowerLost(OSError):
    """Raised by every call once the power is off (``crash_at``): the store sees EIO."""

    def __init__(self) -> None:
        super().__init__(5, "simulated power cut")


class PowerCutFileLayer:
    """A FileLayer over ``inner`` with a simulated power cut (``cut``)."""

    def __init__(self, inner: FileLayer = OS_FS, *, renames_keep_source: bool = False) -> None:
        self.inner = inner
        self.renames_keep_source = renames_keep_source
        """Undo an un-synced rename as POSIX file systems do: the file is back under its
        old name (by default it is simply lost, which is harsher than real ones)."""
        self._lock = threading.RLock()
        self._fd_path: dict[int, str] = {}
        self._synced: dict[str, int] = {}
        """path -> bytes covered by the last fsync (files seen since the last cut)."""
        self._new_entries: dict[str, str] = {}
        """path of a created file -> its directory; gone at a cut unless the dir was synced."""
        self._renames: list[tuple[str, str, bytes | None]] = []
        """(directory, target, the target's durable bytes before) of un-synced renames."""
        self.cuts = 0
        self.crash_at: int | None = None
        """Lose power at this mutating call (counted in ``ops``): it and all later calls
        raise ``PowerLost`` until ``cut``."""
        self.ops = 0
        self.dead = False

    def _tick(self) -> None:
        if self.dead:
            raise PowerLost()
        self.ops += 1
        if self.crash_at is not None and self.ops >= self.crash_at:
            self.dead = True
            raise PowerLost()

    # ------------------------------------------------------------------ helpers

    def _track(self, path: str) -> None:
        """First sight of an existing file: durable as it is."""
        if path not in self._synced and self.inner.exists(path):
            self._synced[path] = self.inner.getsize(path)

    def _durable_bytes(self, path: str) -> bytes | None:
        if not self.inner.exists(path) or path in self._new_entries:
            return None
        size = self._synced.get(path, self.inner.getsize(path))
        with open(path, "rb") as handle:
            return handle.read(size)

    # ------------------------------------------------------------------ FileLayer

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self._tick()
        with self._lock:
            existed = self.inner.exists(path)
            if existed:
                self._track(path)
            fd = self.inner.open(path, flags, mode)
            self._fd_path[fd] = path
            if not existed:
                self._synced[path] = 0
                self._new_entries[path] = os.path.dirname(path)
            elif flags & os.O_TRUNC:
                pass  # a truncation is only durable after the next fsync
            return fd

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        self._tick()
        return self.inner.write(fd, data)

    def pread(self, fd: int, length: int, offset: int) -> bytes:
        return self.inner.pread(fd, length, offset)

    def fsync(self, fd: int) -> None:
        self._tick()
        self.inner.fsync(fd)
        with self._lock:
            path = self._fd_path.get(fd)
            if path is not None:
                self._synced[path] = self.inner.fstat_size(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        self._tick()
        self.inner.ftruncate(fd, length)
        with self._lock:
            path = self._fd_path.get(fd)
            if path is not None and self._synced.get(path, 0) > length:
                self._synced[path] = length  # conservative: a shrink counts at once

    def lseek(self, fd: int, pos: int, how: int) -> int:
        return self.inner.lseek(fd, pos, how)

    def fstat_size(self, fd: int) -> int:
        return self.inner.fstat_size(fd)

    def close(self, fd: int) -> None:
        with self._lock:
            self._fd_path.pop(fd, None)
        self.inner.close(fd)

    def fsync_dir(self, path: str) -> None:
        self._tick()
        self.inner.fsync_dir(path)
        with self._lock:
            path = os.path.normpath(path)
            self._new_entries = {p: d for p, d in self._new_entries.items()
                                 if os.path.normpath(d) != path}
            self._renames = [r for r in self._renames if os.path.normpath(r[0]) != path]

    def replace(self, src: str, dst: str) -> None:
        self._tick()
        with self._lock:
            if os.path.isdir(src):
                self.inner.replace(src, dst)
                self._move_tree(src, dst)
                return
            self._track(src)
            old = self._durable_bytes(dst)
            moved = self._durable_bytes(src) if self.renames_keep_source else None
            self.inner.replace(src, dst)
            self._synced[dst] = self._synced.pop(src, self.inner.getsize(dst))
            self._new_entries.pop(src, None)
            self._new_entries.pop(dst, None)
            self._renames.append((os.path.dirname(dst), dst, old, src, moved))

    def _move_tree(self, src: str, dst: str) -> None:
        prefix = src.rstrip("/") + "/"

        def moved(path: str) -> str:
            return dst.rstrip("/") + "/" + path[len(prefix):] if path.startswith(prefix) \
                else path

        self._synced = {moved(p): n for p, n in self._synced.items()}
        self._new_entries = {moved(p): moved(d) for p, d in self._new_entries.items()}
        self._fd_path = {fd: moved(p) for fd, p in self._fd_path.items()}

    def remove(self, path: str) -> None:
        self._tick()
        with self._lock:
            self.inner.remove(path)
            self._synced.pop(path, None)
            self._new_entries.pop(path, None)

    def rmtree(self, path: str) -> None:
        self._tick()
        with self._lock:
            self.inner.rmtree(path)
            prefix = path.rstrip("/") + "/"
            self._synced = {p: n for p, n in self._synced.items() if not p.startswith(prefix)}
            self._new_entries = {p: d for p, d in self._new_entries.items()
                                 if not p.startswith(prefix)}

    def makedirs(self, path: str) -> None:
        self._tick()
        self.inner.makedirs(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def getsize(self, path: str) -> int:
        return self.inner.getsize(path)

    # ------------------------------------------------------------------ the cut

    def cut(self, rng: random.Random | None = None, torn: bool = False) -> int:
        """Lose everything not made durable; returns the number of bytes dropped. The
        store must be abandoned (not closed) first; reopen it on this layer afterwards."""
        rng = rng or random.Random(0)
        dropped = 0
        with self._lock:
            for fd in list(self._fd_path):
                try:
                    self.inner.close(fd)
                except OSError:
                    pass
            self._fd_path.clear()
            for _, target, old, source, moved in reversed(self._renames):
                if moved is not None:
                    with open(source, "wb") as handle:
                        handle.write(moved)
                if old is None:
                    if os.path.exists(target):
                        dropped += os.path.getsize(target)
                        os.remove(target)
                    self._synced.pop(target, None)
                else:
                    with open(target, "wb") as handle:
                        handle.write(old)
                    self._synced[target] = len(old)
            for path in self._new_entries:
                if os.path.exists(path):
                    dropped += os.path.getsize(path)
                    os.remove(path)
                self._synced.pop(path, None)
            for path, durable in self._synced.items():
                if not os.path.exists(path):
                    continue
                size = os.path.getsize(path)
                if size <= durable:
                    continue
                dropped += size - durable
                with open(path, "r+b") as handle:
                    handle.truncate(durable)
                    if torn:
                        handle.seek(durable)
                        handle.write(rng.randbytes(rng.randint(1, size - durable)))
            self._synced.clear()
            self._new_entries.clear()
            self._renames.clear()
            self.cuts += 1
            self.dead = False
            self.crash_at = None
        return dropped
