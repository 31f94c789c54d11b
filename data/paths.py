"""Every file and folder name of the data directory, and nothing else.

Owns: how names are built and recognised (``LevelDB filename.h``; Iggy's
``get_segment_path``)::

    <root>/.lock                                    the data directory's lock (data.lock)
    <root>/topics/                                  all topics
    <root>/topics/~clean-shutdown                   clean-shutdown marker
    <root>/topics/<topic>/topic.json                topic config
    <root>/topics/<topic>/<partition>/              one folder per partition (0, 1, ...)
    <root>/topics/<topic>/<partition>/state.json    replication state (role, epoch, hw)
    <root>/topics/<topic>/<partition>/<base:020d>.log        segment data
    <root>/topics/<topic>/<partition>/<base:020d>.index      dense offset index
    <root>/topics/<topic>/<partition>/<base:020d>.timeindex  sparse time index
    <root>/topics/<topic>/<partition>/<base:020d>.sindex     offset index of a compacted
                                                    segment (instead of ``.index``)
    <segment file>.cleaned   written by the cleaner, not yet committed (removed on open)
    <segment file>.swap      a committed cleaner output not yet renamed into place
                             (recovery finishes the swap)
    <root>/topics/~new-<topic>/      a topic being created (renamed into place when ready)
    <root>/topics/~del-<topic>/      a topic being deleted (removed on the next open)
    <root>/topics/~bad-<topic>/      a topic whose topic.json was unreadable, kept for the operator
    <anything>.bad                   quarantined: unreadable, kept for the operator

Names starting with ``~`` can never be topics (topic names are ``[A-Za-z0-9._-]``), so the
store's own entries never collide with a topic.

Must not import: Twisted, anything else of Skerry but ``data.names`` (the name rule). No I/O here.
"""

from __future__ import annotations

import os
import re

from data.names import is_valid_name

__all__ = [
    "LOCK_FILE",
    "TOPICS_DIR",
    "CLEAN_MARKER",
    "TOPIC_CONFIG",
    "STATE_FILE",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIMEINDEX_SUFFIX",
    "SINDEX_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "BAD_SUFFIX",
    "NEW_PREFIX",
    "DELETED_PREFIX",
    "QUARANTINED_PREFIX",
    "is_valid_topic_name",
    "lock_path",
    "topics_dir",
    "clean_marker_path",
    "topic_dir",
    "new_topic_dir",
    "deleted_topic_dir",
    "quarantined_topic_dir",
    "topic_config_path",
    "partition_dir",
    "state_path",
    "segment_name",
    "log_path",
    "index_path",
    "timeindex_path",
    "sindex_path",
    "quarantine_path",
    "parse_segment_name",
    "parse_partition_name",
    "parse_swap_name",
]

LOCK_FILE = ".lock"
TOPICS_DIR = "topics"
CLEAN_MARKER = "~clean-shutdown"
TOPIC_CONFIG = "topic.json"
STATE_FILE = "state.json"
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
SINDEX_SUFFIX = ".sindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
BAD_SUFFIX = ".bad"
NEW_PREFIX = "~new-"
DELETED_PREFIX = "~del-"
QUARANTINED_PREFIX = "~bad-"
_DIGITS = 20

_SEGMENT_RE = re.compile(r"([0-9]{20})(\.log|\.index|\.timeindex|\.sindex)")
_PARTITION_RE = re.compile(r"0|[1-9][0-9]{0,8}")


def is_valid_topic_name(name: str) -> bool:
    """The name rule (``data.names``): 1-249 characters of ``[A-Za-z0-9._-]``, and not
    ``.`` or ``..`` (spec: Names)."""
    return is_valid_name(name)


def lock_path(root: str) -> str:
    return os.path.join(root, LOCK_FILE)


def topics_dir(root: str) -> str:
    return os.path.join(root, TOPICS_DIR)


def clean_marker_path(root: str) -> str:
    return os.path.join(root, TOPICS_DIR, CLEAN_MARKER)


def topic_dir(root: str, topic: str) -> str:
    return os.path.join(root, TOPICS_DIR, topic)


def new_topic_dir(root: str, topic: str) -> str:
    return os.path.join(root, TOPICS_DIR, NEW_PREFIX + topic)


def deleted_topic_dir(root: str, topic: str) -> str:
    return os.path.join(root, TOPICS_DIR, DELETED_PREFIX + topic)


def quarantined_topic_dir(root: str, topic: str) -> str:
    return os.path.join(root, TOPICS_DIR, QUARANTINED_PREFIX + topic)


def topic_config_path(topic_path: str) -> str:
    return os.path.join(topic_path, TOPIC_CONFIG)


def partition_dir(topic_path: str, partition: int) -> str:
    return os.path.join(topic_path, str(partition))


def state_path(partition_path: str) -> str:
    return os.path.join(partition_path, STATE_FILE)


def segment_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """``00000000000000000042.log`` for base offset 42."""
    return f"{base_offset:0{_DIGITS}d}{suffix}"


def log_path(partition_path: str, base_offset: int) -> str:
    return os.path.join(partition_path, segment_name(base_offset, LOG_SUFFIX))


def index_path(partition_path: str, base_offset: int) -> str:
    return os.path.join(partition_path, segment_name(base_offset, INDEX_SUFFIX))


def timeindex_path(partition_path: str, base_offset: int) -> str:
    return os.path.join(partition_path, segment_name(base_offset, TIMEINDEX_SUFFIX))


def sindex_path(partition_path: str, base_offset: int) -> str:
    return os.path.join(partition_path, segment_name(base_offset, SINDEX_SUFFIX))


def quarantine_path(path: str) -> str:
    """Where an unreadable file is moved: ``<path>.bad``."""
    return path + BAD_SUFFIX


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """``("00000000000000000042.index")`` -> ``(42, ".index")``; ``None`` for other names
    (``.cleaned``/``.swap`` files included: ``parse_swap_name`` reads those)."""
    match = _SEGMENT_RE.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def parse_partition_name(name: str) -> int | None:
    """``"7"`` -> ``7``; ``None`` for anything that is not a canonical partition folder."""
    if _PARTITION_RE.fullmatch(name) is None:
        return None
    return int(name)


def parse_swap_name(name: str) -> tuple[int, str, str] | None:
    """``"00000000000000000042.log.swap"`` -> ``(42, ".log", ".swap")``; likewise for
    ``.cleaned``; ``None`` for other names."""
    for marker in (SWAP_SUFFIX, CLEANED_SUFFIX):
        if name.endswith(marker):
            parsed = parse_segment_name(name[: -len(marker)])
            if parsed is None:
                return None
            return parsed[0], parsed[1], marker
    return None
