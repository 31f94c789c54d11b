"""The storage package's own exceptions, in the store's words.

Owns: ``DataDirError`` and its kinds (the directory is a file, or another process holds its
lock), ``TopicQuarantined`` (a refusal a caller can act on) and ``StorageError`` (a read,
write or fsync failed; nothing was acknowledged). Plain classes with no wire code: the
broker shell turns the first into one line for the operator, the core wraps the second in
its own refusal, each transport maps ``StorageError`` onto its own errors
(``broker.v1.errors``, ``broker.iggy.errors``).

Must not import: Twisted, anything of ``broker``. Only the neutral root
``data.refusal.SkerryError``.
"""

from __future__ import annotations

from data.refusal import SkerryError

__all__ = ["DataDirError", "DataDirIsAFile", "DataDirLocked", "TopicQuarantined", "StorageError",
           "KeyRequired"]


class StorageError(SkerryError):
    """The store could not write or read; nothing was acknowledged. ``message`` names the
    partition or file and the operating system's reason."""

    description = "storage failure; nothing was acknowledged"


class KeyRequired(SkerryError):
    """A record without a key was produced to a compacted topic (``cleanup_policy``
    ``compact``): compaction keeps the latest record per key, so every record needs one
    (Kafka refuses them the same way). Nothing of the request was appended."""

    description = "a compacted topic takes only records with a key"


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


class TopicQuarantined(SkerryError):
    """A topic cannot be created: a quarantined topic of the same name (``~bad-<topic>``,
    moved aside because its ``topic.json`` could not be read) is waiting for the operator.
    Creating a new, empty topic there would collide with the documented repair (fix
    ``topic.json`` and rename the folder back)."""

    description = "topic is quarantined"

    def __init__(self, topic: str, path: str = "its ~bad- folder") -> None:
        super().__init__(f"topic {topic} is quarantined at {path}")
        self.topic = topic
        self.path = path
