"""An in-memory etcd v3 speaking the JSON gateway's shapes, on a ``task.Clock``.

Owns: ``FakeEtcd``, a single-store model of etcd's MVCC key space (a global revision,
per-key create/mod revision and version, history kept for watches until compacted), txns
with ``VERSION``/``CREATE``/``MOD``/``VALUE``/``LEASE`` compares, leases that expire on the
injected clock and delete their keys in one revision, and watches by key or prefix from a
start revision (a compacted start is answered ``canceled`` with ``compact_revision``);
and ``FakeGateway``, the HTTP transport ``broker.services.etcd.EtcdClient`` takes, routing
each endpoint URL to the one store, with faults per member: down (connection refused,
open watch streams cut), ``503`` answers, and black holes (a request that never answers;
optionally applied first, as a txn that committed but timed out).

Answers mimic the gateway: 64-bit ints as JSON strings, false and zero fields omitted,
keys and values base64. ``lease/keepalive`` answers ``{"result": ...}`` as the gateway's
stream does; an expired lease's keepalive has no ``TTL``.

Must not import: the broker's services (it is what they are tested against), the global
reactor. No sleeps: everything happens when ``clock.advance`` or a request runs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionLost, ConnectionRefusedError
from twisted.internet.interfaces import IDelayedCall
from twisted.internet.task import Clock
from twisted.python.failure import Failure

__all__ = ["FakeEtcd", "FakeGateway", "StoredKv"]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def _num(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


def _omit_zero(document: dict[str, Any]) -> dict[str, Any]:
    """The gateway's JSON: zero, false, empty fields left out; ints as strings."""
    out: dict[str, Any] = {}
    for name, value in document.items():
        if value in (0, False, "", None, [], {}) and value is not True:
            continue
        out[name] = str(value) if isinstance(value, int) and not isinstance(value, bool) \
            else value
    return out


@dataclass(frozen=True)
class StoredKv:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0

    def to_json(self) -> dict[str, Any]:
        return _omit_zero({"key": _b64(self.key), "value": _b64(self.value),
                           "create_revision": self.create_revision,
                           "mod_revision": self.mod_revision, "version": self.version,
                           "lease": self.lease})


@dataclass
class _Event:
    deleted: bool
    kv: StoredKv


@dataclass
class _Lease:
    lease_id: int
    ttl: int
    timer: IDelayedCall
    keys: set[bytes] = field(default_factory=set)


@dataclass
class _Watcher:
    key: bytes
    range_end: bytes
    next_revision: int
    emit: Callable[[dict[str, Any]], None]
    watch_id: int

    def matches(self, key: bytes) -> bool:
        if not self.range_end:
            return key == self.key
        if self.range_end == b"\x00":
            return key >= self.key
        return self.key <= key < self.range_end


class FakeEtcd:
    """The store. ``handle(path, body)`` answers one unary gateway call as ``(status,
    document)``; ``watch`` opens a watch stream. ``MIN_TTL``: etcd raises shorter leases."""

    MIN_TTL = 2

    def __init__(self, clock: Clock, *, raft_term: int = 2) -> None:
        self.clock = clock
        self.revision = 1
        self.raft_term = raft_term
        self.compact_revision = 0
        self._kvs: dict[bytes, StoredKv] = {}
        self._history: list[tuple[int, list[_Event]]] = []
        self._leases: dict[int, _Lease] = {}
        self._next_lease = 0x7E5A0000
        self._watchers: dict[int, _Watcher] = {}
        self._next_watch = 0
        self._outbox: list[tuple[int, list[_Event]]] = []
        self._delivering = False

    # --- helpers the tests read ---------------------------------------------------------

    def get(self, key: str) -> StoredKv | None:
        return self._kvs.get(key.encode())

    def leases(self) -> set[int]:
        return set(self._leases)

    def keys(self) -> list[bytes]:
        return sorted(self._kvs)

    def compact(self, revision: int) -> None:
        """Forget history before ``revision`` (etcd ``compaction``)."""
        self.compact_revision = max(self.compact_revision, revision)
        self._history = [(r, evs) for r, evs in self._history if r >= revision]

    # --- the gateway's unary calls ------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return _omit_zero({"cluster_id": 14841639068965178418, "member_id": 10276657743932975437,
                           "revision": self.revision, "raft_term": self.raft_term})

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handlers: dict[str, Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]] = {
            "/v3/kv/range": self._range, "/v3/kv/put": self._put_call,
            "/v3/kv/deleterange": self._delete_call, "/v3/kv/txn": self._txn,
            "/v3/kv/compaction": self._compaction, "/v3/lease/grant": self._grant,
            "/v3/lease/keepalive": self._keepalive, "/v3/lease/revoke": self._revoke,
        }
        handler = handlers.get(path)
        if handler is None:
            return 404, {"error": "Not Found", "code": 5, "message": "Not Found"}
        return handler(body)

    @staticmethod
    def _error(status: int, code: int, message: str) -> tuple[int, dict[str, Any]]:
        return status, {"error": message, "code": code, "message": message}

    def _range_kvs(self, key: bytes, range_end: bytes) -> list[StoredKv]:
        probe = _Watcher(key, range_end, 0, lambda d: None, -1)
        return [kv for k, kv in sorted(self._kvs.items()) if probe.matches(k)]

    def _range(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        kvs = self._range_kvs(_unb64(body.get("key")), _unb64(body.get("range_end")))
        return 200, self._range_answer(kvs)

    def _range_answer(self, kvs: list[StoredKv]) -> dict[str, Any]:
        return _omit_zero({"header": self.header(), "kvs": [kv.to_json() for kv in kvs],
                           "count": len(kvs)})

    def _commit(self, events: list[_Event]) -> None:
        if not events:
            return
        self._history.append((self.revision, events))
        # A watcher reacting to an event may write (a nested commit): its events queue up
        # behind the ones being delivered, so every watcher sees revisions in order, as
        # etcd's watch streams do.
        self._outbox.append((self.revision, events))
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._outbox:
                item = self._outbox.pop(0)
                for watcher in list(self._watchers.values()):
                    self._deliver(watcher, [item])
        finally:
            self._delivering = False

    def _apply_put(self, key: bytes, value: bytes, lease: int, events: list[_Event]) -> None:
        old = self._kvs.get(key)
        if old is not None and old.lease and old.lease in self._leases:
            self._leases[old.lease].keys.discard(key)
        kv = StoredKv(key, value, old.create_revision if old else self.revision,
                      self.revision, (old.version if old else 0) + 1, lease)
        self._kvs[key] = kv
        if lease:
            self._leases[lease].keys.add(key)
        events.append(_Event(False, kv))

    def _apply_delete(self, key: bytes, range_end: bytes, events: list[_Event]) -> int:
        gone = self._range_kvs(key, range_end)
        for kv in gone:
            del self._kvs[kv.key]
            if kv.lease and kv.lease in self._leases:
                self._leases[kv.lease].keys.discard(kv.key)
            events.append(_Event(True, StoredKv(kv.key, b"", 0, self.revision, 0)))
        return len(gone)

    def _lease_missing(self, op: dict[str, Any]) -> bool:
        lease = _num(op.get("lease"))
        return bool(lease) and lease not in self._leases

    def _put_call(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self._lease_missing(body):
            return self._error(404, 5, "etcdserver: requested lease not found")
        self.revision += 1
        events: list[_Event] = []
        self._apply_put(_unb64(body.get("key")), _unb64(body.get("value")),
                        _num(body.get("lease")), events)
        self._commit(events)
        return 200, {"header": self.header()}

    def _delete_call(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        events: list[_Event] = []
        key, end = _unb64(body.get("key")), _unb64(body.get("range_end"))
        if not self._range_kvs(key, end):
            return 200, {"header": self.header()}
        self.revision += 1
        deleted = self._apply_delete(key, end, events)
        self._commit(events)
        return 200, _omit_zero({"header": self.header(), "deleted": deleted})

    def _compare(self, cmp: dict[str, Any]) -> bool:
        kv = self._kvs.get(_unb64(cmp.get("key")))
        target = cmp.get("target", "VERSION")
        if target == "VALUE":
            if kv is None:
                return False  # etcd: a VALUE compare on an absent key fails
            actual: Any = kv.value
            wanted: Any = _unb64(cmp.get("value"))
        else:
            field_name = {"VERSION": "version", "CREATE": "create_revision",
                          "MOD": "mod_revision", "LEASE": "lease"}[target]
            actual = getattr(kv, field_name) if kv is not None else 0
            wanted = _num(cmp.get(field_name))
        result = cmp.get("result", "EQUAL")
        return {"EQUAL": actual == wanted, "NOT_EQUAL": actual != wanted,
                "GREATER": actual > wanted, "LESS": actual < wanted}[result]

    def _txn(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        succeeded = all(self._compare(c) for c in body.get("compare", []))
        ops = body.get("success" if succeeded else "failure", [])
        for op in ops:
            if "request_put" in op and self._lease_missing(op["request_put"]):
                return self._error(404, 5, "etcdserver: requested lease not found")
        writes = any("request_put" in op or "request_delete_range" in op for op in ops)
        if writes:
            self.revision += 1
        events: list[_Event] = []
        responses: list[dict[str, Any]] = []
        for op in ops:
            if "request_put" in op:
                put = op["request_put"]
                self._apply_put(_unb64(put.get("key")), _unb64(put.get("value")),
                                _num(put.get("lease")), events)
                responses.append({"response_put": {"header": self.header()}})
            elif "request_range" in op:
                rng = op["request_range"]
                kvs = self._range_kvs(_unb64(rng.get("key")), _unb64(rng.get("range_end")))
                responses.append({"response_range": self._range_answer(kvs)})
            elif "request_delete_range" in op:
                dr = op["request_delete_range"]
                n = self._apply_delete(_unb64(dr.get("key")), _unb64(dr.get("range_end")),
                                       events)
                responses.append({"response_delete_range": _omit_zero(
                    {"header": self.header(), "deleted": n})})
        self._commit(events)
        return 200, _omit_zero({"header": self.header(), "succeeded": succeeded,
                                "responses": responses})

    def _compaction(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.compact(_num(body.get("revision")))
        return 200, {"header": self.header()}

    # --- leases -------------------------------------------------------------------------

    def _grant(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ttl = max(self.MIN_TTL, _num(body.get("TTL")))
        lease_id = _num(body.get("ID"))
        if not lease_id:
            self._next_lease += 1
            lease_id = self._next_lease
        if lease_id in self._leases:
            return self._error(400, 9, "etcdserver: lease already exists")
        timer = self.clock.callLater(ttl, self._expire, lease_id)
        self._leases[lease_id] = _Lease(lease_id, ttl, timer)
        return 200, _omit_zero({"header": self.header(), "ID": lease_id, "TTL": ttl})

    def _keepalive(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        lease_id = _num(body.get("ID"))
        lease = self._leases.get(lease_id)
        if lease is None:
            return 200, {"result": _omit_zero({"header": self.header(), "ID": lease_id})}
        lease.timer.reset(lease.ttl)
        return 200, {"result": _omit_zero({"header": self.header(), "ID": lease_id,
                                           "TTL": lease.ttl})}

    def _revoke(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        lease_id = _num(body.get("ID"))
        if lease_id not in self._leases:
            return self._error(404, 5, "etcdserver: requested lease not found")
        self._leases[lease_id].timer.cancel()
        self._drop_lease(lease_id)
        return 200, {"header": self.header()}

    def _expire(self, lease_id: int) -> None:
        if lease_id in self._leases:
            self._drop_lease(lease_id)

    def _drop_lease(self, lease_id: int) -> None:
        lease = self._leases.pop(lease_id)
        if not lease.keys:
            return
        self.revision += 1
        events: list[_Event] = []
        for key in sorted(lease.keys):
            self._apply_delete(key, b"", events)
        self._commit(events)

    # --- watches ------------------------------------------------------------------------

    def watch(self, body: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> int:
        """Open a watch for ``body["create_request"]``; ``emit`` gets each ``{"result"}``
        document. Returns the watch id (``cancel_watch`` closes it)."""
        request = body.get("create_request", {})
        start = _num(request.get("start_revision")) or self.revision + 1
        self._next_watch += 1
        watcher = _Watcher(_unb64(request.get("key")), _unb64(request.get("range_end")),
                           start, emit, self._next_watch)
        emit({"result": _omit_zero({"header": self.header(), "created": True,
                                    "watch_id": watcher.watch_id})})
        if start < self.compact_revision:
            emit({"result": _omit_zero({"header": self.header(), "canceled": True,
                                        "compact_revision": self.compact_revision,
                                        "watch_id": watcher.watch_id})})
            return watcher.watch_id
        self._watchers[watcher.watch_id] = watcher
        self._deliver(watcher, self._history)
        return watcher.watch_id

    def cancel_watch(self, watch_id: int) -> None:
        self._watchers.pop(watch_id, None)

    def _deliver(self, watcher: _Watcher, history: list[tuple[int, list[_Event]]]) -> None:
        out = []
        for revision, events in history:
            if revision < watcher.next_revision:
                continue
            for ev in events:
                if watcher.matches(ev.kv.key):
                    doc = {"kv": ev.kv.to_json()}
                    if ev.deleted:
                        doc["type"] = "DELETE"
                    out.append(doc)
            watcher.next_revision = revision + 1
        if out:
            watcher.emit({"result": _omit_zero({"header": self.header(), "events": out,
                                                "watch_id": watcher.watch_id})})


@dataclass
class _Stream:
    member: str
    watch_id: int
    on_chunk: Callable[[bytes], None]
    done: Deferred[None]
    closed: bool = False


@dataclass
class _Member:
    down: bool = False
    status: int = 0                 # answer every call with this HTTP status (503...)
    black_hole: bool = False        # never answer
    apply_then_hang: bool = False   # perform the call, then never answer


class FakeGateway:
    """The ``HttpTransport`` of ``broker.services.etcd`` over one ``FakeEtcd``, one "member"
    per endpoint URL (scheme://host:port). Faults are per member."""

    def __init__(self, etcd: FakeEtcd, endpoints: list[str]) -> None:
        self.etcd = etcd
        self.members = {url: _Member() for url in endpoints}
        self.calls: list[tuple[str, str]] = []   # (member, path), in order
        self._streams: list[_Stream] = []

    def _split(self, url: str) -> tuple[str, str]:
        for member in self.members:
            if url.startswith(member + "/"):
                return member, url[len(member):]
        raise AssertionError(f"no member for {url}")

    def kill(self, member: str) -> None:
        """The member dies: new connections are refused, its watch streams are cut."""
        self.members[member].down = True
        for stream in [s for s in self._streams if s.member == member and not s.closed]:
            stream.closed = True
            self.etcd.cancel_watch(stream.watch_id)
            stream.done.errback(Failure(ConnectionLost("member killed")))
        self._streams = [s for s in self._streams if not s.closed]

    def revive(self, member: str) -> None:
        self.members[member] = _Member()

    def post(self, url: str, body: bytes) -> Deferred[tuple[int, bytes]]:
        member, path = self._split(url)
        self.calls.append((member, path))
        state = self.members[member]
        if state.down:
            return fail(ConnectionRefusedError(member))
        if state.black_hole:
            return Deferred()
        if state.status:
            return succeed((state.status, json.dumps(
                {"error": "etcdserver: no leader", "code": 14,
                 "message": "etcdserver: no leader"}).encode()))
        status, document = self.etcd.handle(path, json.loads(body))
        if state.apply_then_hang:
            return Deferred()
        return succeed((status, json.dumps(document).encode()))

    def stream(self, url: str, body: bytes,
               on_chunk: Callable[[bytes], None]) -> tuple[Deferred[None], Callable[[], None]]:
        member, path = self._split(url)
        self.calls.append((member, path))
        if self.members[member].down:
            return fail(ConnectionRefusedError(member)), lambda: None
        done: Deferred[None] = Deferred()
        stream = _Stream(member, 0, on_chunk, done)

        def emit(document: dict[str, Any]) -> None:
            if not stream.closed:
                # Split each line in two chunks: the client must reassemble lines.
                line = json.dumps(document).encode() + b"\n"
                on_chunk(line[:7])
                on_chunk(line[7:])

        self._streams.append(stream)
        stream.watch_id = self.etcd.watch(json.loads(body), emit)

        def cancel() -> None:
            if not stream.closed:
                stream.closed = True
                self.etcd.cancel_watch(stream.watch_id)
                done.callback(None)

        return done, cancel

    def open_streams(self) -> int:
        return sum(1 for s in self._streams if not s.closed)

