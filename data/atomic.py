"""Atomic replacement of small state files (topic metadata, groups.json, offsets.json, roles).

Owns: the one way Skerry replaces a small file so that a crash at any moment leaves either
the old or the new content, never an empty or torn file: write ``<name>.tmp``, fsync it,
rename over the target, fsync the directory.

Must not import: Twisted. Callers decide on which thread this runs.
"""

from __future__ import annotations

import json
import os
from typing import Any

from data.fs import OS_FS, FileLayer

__all__ = ["write_atomic", "write_json_atomic", "read_json"]


def write_atomic(path: str, data: bytes, fs: FileLayer = OS_FS) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    tmp = path + ".tmp"
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = fs.write(fd, view)
            view = view[written:]
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.replace(tmp, path)
    fs.fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_json_atomic(path: str, obj: Any, fs: FileLayer = OS_FS) -> None:
    """Serialise ``obj`` as JSON (sorted keys, trailing newline) and replace ``path``."""
    write_atomic(path, (json.dumps(obj, sort_keys=True, indent=1) + "\n").encode(), fs)


def read_json(path: str, default: Any = None, fs: FileLayer = OS_FS) -> Any:
    """Load JSON from ``path``; ``default`` when the file does not exist.

    A file that exists but does not parse raises ``ValueError`` naming the path: state files
    are only ever replaced atomically, so a damaged one is news the operator must see.
    """
    if not fs.exists(path):
        return default
    fd = fs.open(path, os.O_RDONLY)
    try:
        size = fs.fstat_size(fd)
        raw = fs.pread(fd, size, 0) if size else b""
    finally:
        fs.close(fd)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
