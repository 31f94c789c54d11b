"""Iggy streams, topics and consumer groups <-> the store's flat topics and V1 groups: a
service the shell builds and the Iggy handlers call.

Owns: ``Catalog``, the catalog (``iggy.json`` in the data directory): every stream (id, name,
created_at), its topics (id, name, the store topic holding them, created_at and the Iggy
settings: compression, message expiry, max size, replication factor) and each topic's
consumer groups (id, name). Ids are 0-based and never reused within their scope.

The mapping:

* Stream ``default`` (id 0, created at first start) *is* the V1 namespace: its topics are
  the store topics with the same names, so V1 and Iggy see the same messages and offsets.
  V1 topics created later (auto-create, ADMIN_CREATE_TOPIC) are adopted with the next free
  id the first time the Iggy side looks; topics deleted over V1 disappear from it.
* Topics of every other stream live in store topics named ``__iggy.<n>`` (``n`` a counter
  of this catalog, skipping names the store already has). The prefix is reserved: the
  default stream never lists store topics that carry it, so no V1 topic can be mistaken
  for another stream's topic, and renaming a stream or topic changes no file.
* A consumer group of an Iggy topic is the V1 group of the same name on the store topic
  (so V1 groups on the default stream's topics show up as Iggy consumer groups, adopted
  with the next group id); ``group_name_for_consumer`` names the pseudo-group that holds a
  plain Iggy consumer's offsets.

Every change is written with ``data.atomic.write_json_atomic`` (tmp, fsync, rename, dir
fsync) before the caller answers. Store topics are created and deleted by the handlers
through the core, never here; the store's topic names come from the ``store_topics``
callable the shell passes in. Refusals are ``broker.services.errors`` classes; the
transport picks their wire codes.

Must not import: Twisted, sockets, the core, the Iggy transport.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.services.errors import (
    GroupNameTaken,
    InvalidGroupName,
    InvalidStreamName,
    InvalidTopicName,
    ServiceError,
    StreamNameTaken,
    TopicNameTaken,
    UnknownStreamId,
    UnknownStreamName,
    UnknownTopicId,
    UnknownTopicName,
)
from data.atomic import read_json, write_json_atomic
from data.fs import OS_FS, FileLayer
from data.names import IGGY_GROUP_PREFIX, IGGY_STORE_PREFIX, MAX_NAME_CHARS, NAME_CHARS
from data.paths import is_valid_topic_name

__all__ = [
    "Catalog",
    "StreamEntry",
    "TopicEntry",
    "GroupEntry",
    "CATALOG_FILE",
    "DEFAULT_STREAM_NAME",
    "DEFAULT_STREAM_ID",
    "STORE_PREFIX",
    "CONSUMER_GROUP_PREFIX",
    "group_name_for_consumer",
    "store_retention",
]

log = logging.getLogger("skerry.iggy")

CATALOG_FILE = "iggy.json"
DEFAULT_STREAM_NAME = "default"
DEFAULT_STREAM_ID = 0
STORE_PREFIX = IGGY_STORE_PREFIX
"""Store topics of streams other than ``default`` are ``__iggy.<n>`` (``data.names``)."""
CONSUMER_GROUP_PREFIX = IGGY_GROUP_PREFIX
"""The V1 group holding a plain Iggy consumer's offsets is ``iggy.consumer.<id>``."""
_FORMAT_VERSION = 1


def group_name_for_consumer(consumer_id: int | str) -> str:
    """The pseudo-group whose committed offsets are a plain consumer's stored offsets:
    ``iggy.consumer.<n>`` for a numeric id, ``iggy.consumer.name.<text>`` for a name."""
    if isinstance(consumer_id, int):
        return f"{CONSUMER_GROUP_PREFIX}{consumer_id}"
    return f"{CONSUMER_GROUP_PREFIX}name.{consumer_id}"


@dataclass
class GroupEntry:
    id: int
    name: str
    created_at: int


@dataclass
class TopicEntry:
    """An Iggy topic. ``None`` settings (topics adopted from V1) are read from the store
    topic's own configuration."""

    id: int
    name: str
    store: str
    created_at: int
    compression: int = 1
    message_expiry: int | None = None
    max_topic_size: int | None = None
    replication_factor: int | None = None
    groups: dict[int, GroupEntry] = field(default_factory=dict)
    next_group_id: int = 0

    def group(self, ident: int | str) -> GroupEntry | None:
        if isinstance(ident, int):
            return self.groups.get(ident)
        for entry in self.groups.values():
            if entry.name == ident:
                return entry
        return None


@dataclass
class StreamEntry:
    id: int
    name: str
    created_at: int
    topics: dict[int, TopicEntry] = field(default_factory=dict)
    next_topic_id: int = 0

    @property
    def is_default(self) -> bool:
        return self.id == DEFAULT_STREAM_ID

    def topic(self, ident: int | str) -> TopicEntry | None:
        if isinstance(ident, int):
            return self.topics.get(ident)
        for entry in self.topics.values():
            if entry.name == ident:
                return entry
        return None


class Catalog:
    """The persisted Iggy catalog over one store.

    ``store_topics()`` returns the names of the store's topics now (the default stream is
    kept in step with it). ``now_us()`` stamps ``created_at`` (wall-clock microseconds).
    """

    def __init__(self, data_dir: str, *, store_topics: Callable[[], Collection[str]],
                 now_us: Callable[[], int], fs: FileLayer = OS_FS) -> None:
        self.path = os.path.join(data_dir, CATALOG_FILE)
        self._store_topics = store_topics
        self._now_us = now_us
        self._fs = fs
        self.streams: dict[int, StreamEntry] = {}
        self.next_stream_id = 0
        self.next_store_id = 0
        self._load()

    # ------------------------------------------------------------------ persistence

    def _load(self) -> None:
        doc = read_json(self.path, None, self._fs)
        if doc is None:
            now = self._now_us()
            self.streams = {DEFAULT_STREAM_ID: StreamEntry(DEFAULT_STREAM_ID, DEFAULT_STREAM_NAME, now)}
            self.next_stream_id = DEFAULT_STREAM_ID + 1
            self.sync_default(save=False)
            self.save()
            log.info("iggy: created %s with stream %s", self.path, DEFAULT_STREAM_NAME)
            return
        try:
            self._from_json(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{self.path}: damaged Iggy catalog ({exc})") from exc
        self.sync_default()

    def _from_json(self, doc: Any) -> None:
        if not isinstance(doc, dict) or doc.get("version") != _FORMAT_VERSION:
            raise ValueError(f"expected an object with version {_FORMAT_VERSION}")
        self.next_stream_id = int(doc["next_stream_id"])
        self.next_store_id = int(doc["next_store_id"])
        streams: dict[int, StreamEntry] = {}
        for s in doc["streams"]:
            stream = StreamEntry(int(s["id"]), str(s["name"]), int(s["created_at"]),
                                 next_topic_id=int(s["next_topic_id"]))
            for t in s["topics"]:
                topic = TopicEntry(
                    int(t["id"]), str(t["name"]), str(t["store"]), int(t["created_at"]),
                    int(t["compression"]), _opt_int(t.get("message_expiry")),
                    _opt_int(t.get("max_topic_size")), _opt_int(t.get("replication_factor")),
                    next_group_id=int(t["next_group_id"]))
                for g in t["groups"]:
                    topic.groups[int(g["id"])] = GroupEntry(int(g["id"]), str(g["name"]),
                                                            int(g["created_at"]))
                stream.topics[topic.id] = topic
            streams[stream.id] = stream
        if DEFAULT_STREAM_ID not in streams:
            raise ValueError(f"stream {DEFAULT_STREAM_ID} ({DEFAULT_STREAM_NAME}) is missing")
        self.streams = streams

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _FORMAT_VERSION,
            "next_stream_id": self.next_stream_id,
            "next_store_id": self.next_store_id,
            "streams": [
                {
                    "id": s.id, "name": s.name, "created_at": s.created_at,
                    "next_topic_id": s.next_topic_id,
                    "topics": [
                        {
                            "id": t.id, "name": t.name, "store": t.store,
                            "created_at": t.created_at, "compression": t.compression,
                            "message_expiry": t.message_expiry,
                            "max_topic_size": t.max_topic_size,
                            "replication_factor": t.replication_factor,
                            "next_group_id": t.next_group_id,
                            "groups": [{"id": g.id, "name": g.name, "created_at": g.created_at}
                                       for g in sorted(t.groups.values(), key=_by_id)],
                        }
                        for t in sorted(s.topics.values(), key=_by_id)
                    ],
                }
                for s in sorted(self.streams.values(), key=_by_id)
            ],
        }

    def save(self) -> None:
        """Replace ``iggy.json`` atomically and durably."""
        write_json_atomic(self.path, self.to_json(), self._fs)

    # ------------------------------------------------------------------ the default stream

    @property
    def default(self) -> StreamEntry:
        return self.streams[DEFAULT_STREAM_ID]

    def sync_default(self, save: bool = True) -> bool:
        """Adopt store topics the default stream does not list yet (sorted by name, next
        ids) and drop those the store no longer has. Returns True when something changed."""
        present = {name for name in self._store_topics() if not name.startswith(STORE_PREFIX)}
        stream = self.default
        known = {t.store: t for t in stream.topics.values()}
        changed = False
        for store_name, entry in known.items():
            if store_name not in present:
                del stream.topics[entry.id]
                changed = True
        for name in sorted(present - known.keys()):
            topic = TopicEntry(stream.next_topic_id, name, name, self._now_us())
            stream.topics[topic.id] = topic
            stream.next_topic_id += 1
            changed = True
        if changed and save:
            self.save()
        return changed

    def orphans(self) -> list[str]:
        """Store topics with the reserved prefix that no stream owns (left by a create or
        delete that stopped half-way)."""
        owned = {t.store for s in self.streams.values() for t in s.topics.values()}
        return sorted(name for name in self._store_topics()
                      if name.startswith(STORE_PREFIX) and name not in owned)

    # ------------------------------------------------------------------ lookups

    def list_streams(self) -> list[StreamEntry]:
        """Every stream, by id."""
        return sorted(self.streams.values(), key=_by_id)

    def stream(self, ident: int | str) -> StreamEntry | None:
        if isinstance(ident, int):
            return self.streams.get(ident)
        for entry in self.streams.values():
            if entry.name == ident:
                return entry
        return None

    def require_stream(self, ident: int | str) -> StreamEntry:
        stream = self.stream(ident)
        if stream is None:
            if isinstance(ident, int):
                raise UnknownStreamId( f"stream {ident} not found")
            raise UnknownStreamName( f"stream {ident!r} not found")
        return stream

    def topic(self, stream: StreamEntry, ident: int | str, store_has: Callable[[str], bool]
              ) -> TopicEntry | None:
        """The topic, or None. For the default stream a miss (or a topic whose store topic
        is gone) re-syncs with the store first."""
        entry = stream.topic(ident)
        if entry is not None and store_has(entry.store):
            return entry
        if stream.is_default:
            self.sync_default()
            entry = stream.topic(ident)
            return entry if entry is not None and store_has(entry.store) else None
        return entry

    def require_topic(self, stream: StreamEntry, ident: int | str,
                      store_has: Callable[[str], bool]) -> TopicEntry:
        entry = self.topic(stream, ident, store_has)
        if entry is None:
            if isinstance(ident, int):
                raise UnknownTopicId(
                                f"topic {ident} not found in stream {stream.name!r}")
            raise UnknownTopicName(
                            f"topic {ident!r} not found in stream {stream.name!r}")
        return entry

    def locate(self, store_name: str) -> tuple[StreamEntry, TopicEntry] | None:
        """The stream and topic that hold a store topic."""
        for stream in self.streams.values():
            for topic in stream.topics.values():
                if topic.store == store_name:
                    return stream, topic
        return None

    # ------------------------------------------------------------------ streams

    def add_stream(self, name: str) -> StreamEntry:
        _check_name(name, InvalidStreamName, "stream")
        if self.stream(name) is not None:
            raise StreamNameTaken( f"stream {name!r} exists")
        stream = StreamEntry(self.next_stream_id, name, self._now_us())
        self.streams[stream.id] = stream
        self.next_stream_id += 1
        self.save()
        return stream

    def rename_stream(self, stream: StreamEntry, name: str) -> None:
        _check_name(name, InvalidStreamName, "stream")
        if stream.is_default and name != DEFAULT_STREAM_NAME:
            raise InvalidStreamName(
                            f"stream {DEFAULT_STREAM_NAME} holds the V1 topics and keeps its name")
        other = self.stream(name)
        if other is not None and other is not stream:
            raise StreamNameTaken( f"stream {name!r} exists")
        stream.name = name
        self.save()

    def remove_stream(self, stream: StreamEntry) -> None:
        del self.streams[stream.id]
        self.save()

    # ------------------------------------------------------------------ topics

    def check_new_topic(self, stream: StreamEntry, name: str) -> None:
        """Refuse a topic name that is invalid or taken in ``stream``."""
        _check_name(name, InvalidTopicName, "topic")
        if stream.is_default and (not is_valid_topic_name(name) or name.startswith(STORE_PREFIX)):
            raise InvalidTopicName(
                            f"topic {name!r}: topics of stream {DEFAULT_STREAM_NAME} are V1 "
                            f"topics: 1-{MAX_NAME_CHARS} characters of [{NAME_CHARS}], not starting with "
                            f"{STORE_PREFIX}")
        if stream.topic(name) is not None:
            raise TopicNameTaken(
                            f"topic {name!r} exists in stream {stream.name!r}")

    def store_name_for(self, stream: StreamEntry, name: str) -> str:
        """The store topic a new topic of ``stream`` goes in: its own name in the default
        stream, the next free ``__iggy.<n>`` elsewhere (the counter is saved with the topic)."""
        if stream.is_default:
            return name
        existing = set(self._store_topics())
        while f"{STORE_PREFIX}{self.next_store_id}" in existing:
            self.next_store_id += 1
        store = f"{STORE_PREFIX}{self.next_store_id}"
        self.next_store_id += 1
        return store

    def add_topic(self, stream: StreamEntry, name: str, store: str, *, compression: int,
                  message_expiry: int, max_topic_size: int, replication_factor: int
                  ) -> TopicEntry:
        """Record a topic whose store topic exists now (adopting one the default stream
        already picked up from the store)."""
        existing = next((t for t in stream.topics.values() if t.store == store), None)
        if existing is not None:
            del stream.topics[existing.id]
        topic = TopicEntry(stream.next_topic_id, name, store, self._now_us(), compression,
                           message_expiry, max_topic_size, replication_factor)
        stream.topics[topic.id] = topic
        stream.next_topic_id += 1
        self.save()
        return topic

    def update_topic(self, stream: StreamEntry, topic: TopicEntry, *, name: str,
                     compression: int, message_expiry: int, max_topic_size: int,
                     replication_factor: int) -> None:
        if name != topic.name:
            if stream.is_default:
                raise InvalidTopicName(
                                f"topics of stream {DEFAULT_STREAM_NAME} are V1 topics and "
                                f"keep their names")
            self.check_new_topic(stream, name)
        topic.name = name
        topic.compression = compression
        topic.message_expiry = message_expiry
        topic.max_topic_size = max_topic_size
        topic.replication_factor = replication_factor
        self.save()

    def remove_topic(self, stream: StreamEntry, topic: TopicEntry) -> None:
        stream.topics.pop(topic.id, None)
        self.save()

    # ------------------------------------------------------------------ consumer groups

    def adopt_groups(self, topic: TopicEntry, names: Iterable[str]) -> None:
        """Give V1 groups of the topic's store topic (not the plain consumers'
        pseudo-groups) an Iggy id, in name order."""
        changed = False
        for name in sorted(names):
            if name.startswith(CONSUMER_GROUP_PREFIX) or topic.group(name) is not None:
                continue
            topic.groups[topic.next_group_id] = GroupEntry(topic.next_group_id, name,
                                                           self._now_us())
            topic.next_group_id += 1
            changed = True
        if changed:
            self.save()

    def add_group(self, topic: TopicEntry, name: str) -> GroupEntry:
        _check_name(name, InvalidGroupName, "consumer group")
        if name.startswith(CONSUMER_GROUP_PREFIX):
            raise InvalidGroupName(
                            f"consumer group names starting with {CONSUMER_GROUP_PREFIX} are "
                            f"reserved")
        if topic.group(name) is not None:
            raise GroupNameTaken(
                            f"consumer group {name!r} exists")
        group = GroupEntry(topic.next_group_id, name, self._now_us())
        topic.groups[group.id] = group
        topic.next_group_id += 1
        self.save()
        return group

    def remove_group(self, topic: TopicEntry, group: GroupEntry) -> None:
        topic.groups.pop(group.id, None)
        self.save()


def store_retention(message_expiry: int, max_topic_size: int, partitions: int
                    ) -> tuple[int | None, int | None]:
    """Store retention for Iggy topic settings: ``message_expiry`` (microseconds; 0 and
    u64::MAX never expire) becomes ``retention_ms`` (rounded up); ``max_topic_size``
    (bytes; 0 and u64::MAX unlimited) is shared between the partitions as
    ``retention_bytes``. Retention removes whole sealed segments."""
    never = (0, (1 << 64) - 1)
    retention_ms = None if message_expiry in never else max(1, -(-message_expiry // 1000))
    retention_bytes = None if max_topic_size in never else max(1, max_topic_size // partitions)
    return retention_ms, retention_bytes


def _by_id(entry: Any) -> int:
    return entry.id  # type: ignore[no-any-return]


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _check_name(name: str, error: type[ServiceError], what: str) -> None:
    raw = name.encode("utf-8")
    if not 1 <= len(raw) <= 255 or not name.strip() or any(ord(ch) < 32 for ch in name):
        raise error(f"invalid {what} name {name!r}: 1-255 bytes of printable UTF-8")
