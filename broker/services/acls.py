"""Where the ACLs live, and keeping every broker's authorizer current.

Owns: ``AclService`` — listing, adding and removing ACL bindings — over one of two
stores, both behind the same three methods:

- ``FileAcls``: one broker. ``acls.json`` in the data directory, replaced atomically
  (``data.atomic``: write ``.tmp``, fsync, rename, fsync the directory) before the change
  is put in force.
- ``EtcdAcls``: a cluster. One key, ``/skerry/<cluster id>/acls``, holding every binding
  as one JSON document. A change reads the key, computes the new document and writes it in
  a transaction that compares the key's ``mod_revision`` with the one read (retried when
  another broker won the race), so concurrent changes never lose one another. Every broker
  watches the key and replaces its rules on each event; open connections see the change at
  their next request (decisions are cached per rule set, never per connection).

The JSON document: ``{"version": 1, "acls": [<binding>...]}``, each binding
``access.AclBinding.to_json``'s object.

Must not import: transports.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, succeed

from access import AclBinding, Authorizer, InvalidAcl
from access.authorizer import AclFilter
from data.atomic import read_json, write_json_atomic
from replication.control.txn import Compare, Put, Target, Txn

__all__ = ["AclService", "AclStore", "FileAcls", "EtcdAcls", "encode_acls", "decode_acls",
           "ACLS_FILE"]

log = logging.getLogger("skerry.acls")

ACLS_FILE = "acls.json"
_FORMAT_VERSION = 1
_MAX_RETRIES = 20

Change = Callable[[list[AclBinding]], list[AclBinding]]


def encode_acls(acls: Iterable[AclBinding]) -> bytes:
    doc = {"version": _FORMAT_VERSION, "acls": [a.to_json() for a in sorted(acls)]}
    return (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode()


def decode_acls(raw: Any) -> list[AclBinding]:
    """Bindings from the stored document (bytes or already-parsed JSON)."""
    if isinstance(raw, bytes | str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise InvalidAcl(f"stored ACLs are not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("version") != _FORMAT_VERSION \
            or not isinstance(raw.get("acls"), list):
        raise InvalidAcl("stored ACLs: expected {\"version\": 1, \"acls\": [...]}")
    return [AclBinding.from_json(item) for item in raw["acls"]]


class AclStore(Protocol):
    """Where the bindings are kept: applies ``change`` atomically, puts the result in force
    on ``authorizer`` and fires with the bindings after the change."""

    def start(self, authorizer: Authorizer) -> Deferred[None] | None: ...

    def change(self, change: Change) -> Deferred[list[AclBinding]]: ...

    def stop(self) -> None: ...


class FileAcls:
    """The bindings of a single broker: ``<data_dir>/acls.json``."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, ACLS_FILE)
        self._authorizer: Authorizer | None = None

    def start(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer
        raw = read_json(self.path)
        authorizer.replace(decode_acls(raw) if raw is not None else [])

    def change(self, change: Change) -> Deferred[list[AclBinding]]:
        assert self._authorizer is not None, "FileAcls.start first"
        after = change(self._authorizer.acls)
        write_json_atomic(self.path, json.loads(encode_acls(after)))
        self._authorizer.replace(after)
        return succeed(after)

    def stop(self) -> None:
        return None


class EtcdAcls:
    """The bindings of a cluster: one etcd key, changed by revision-checked transactions
    and watched by every broker."""

    def __init__(self, client: Any, key: str) -> None:
        self.client = client
        self.key = key
        self._authorizer: Authorizer | None = None
        self._watch: Any = None
        self.revision = 0
        """The mod revision of the document in force (0: none stored)."""

    def start(self, authorizer: Authorizer) -> Deferred[None]:
        self._authorizer = authorizer
        return Deferred.fromCoroutine(self._load_and_watch())

    async def _load_and_watch(self) -> None:
        result = await self.client.range(self.key)
        self._apply(result.kvs[0].value if result.kvs else b"",
                    result.kvs[0].mod_revision if result.kvs else 0)
        self._watch = self.client.watch(self.key, self._events,
                                        start_revision=result.header.revision + 1,
                                        on_compacted=self._compacted)

    def _compacted(self, _revision: int) -> None:
        if self._authorizer is not None and self._watch is not None:
            self._watch.cancel()
            Deferred.fromCoroutine(self._load_and_watch()).addErrback(
                lambda f: log.error("reloading ACLs from etcd failed: %s", f.value))

    def _events(self, events: list[Any]) -> None:
        last = events[-1]
        self._apply(b"" if last.deleted else last.kv.value, last.kv.mod_revision)

    def _apply(self, raw: bytes, revision: int) -> None:
        assert self._authorizer is not None
        if revision and revision < self.revision:
            return  # an older document than the one in force (our own write came first)
        try:
            acls = decode_acls(raw) if raw else []
        except InvalidAcl as exc:
            log.error("ACLs in etcd at %s unreadable, keeping the rules in force: %s",
                      self.key, exc)
            return
        self.revision = revision
        self._authorizer.replace(acls)

    def change(self, change: Change) -> Deferred[list[AclBinding]]:
        return Deferred.fromCoroutine(self._change(change))

    async def _change(self, change: Change) -> list[AclBinding]:
        for _ in range(_MAX_RETRIES):
            result = await self.client.range(self.key)
            kv = result.kvs[0] if result.kvs else None
            before = decode_acls(kv.value) if kv is not None and kv.value else []
            after = change(before)
            mod = kv.mod_revision if kv is not None else 0
            txn = Txn(compare=(Compare(self.key, Target.MOD, mod),),
                      success=(Put(self.key, encode_acls(after)),))
            done = await self.client.txn(txn)
            if done.succeeded:
                self._apply(encode_acls(after), done.header.revision)
                return after
        raise InvalidAcl("the ACLs kept changing under this change; try again")

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None


class AclService:
    """List, add and remove bindings; the authorizer always holds what is stored."""

    def __init__(self, authorizer: Authorizer, store: AclStore) -> None:
        self.authorizer = authorizer
        self.store = store

    def start(self) -> Deferred[None] | None:
        return self.store.start(self.authorizer)

    def stop(self) -> None:
        self.store.stop()

    def list(self, flt: AclFilter | None = None) -> list[AclBinding]:
        return self.authorizer.matching(flt or AclFilter())

    def add(self, acls: list[AclBinding]) -> Deferred[list[AclBinding]]:
        """Store ``acls``; fires with those that were not there before."""
        added: list[AclBinding] = []

        def change(before: list[AclBinding]) -> list[AclBinding]:
            have = set(before)
            added[:] = [a for a in acls if a not in have]
            return [*before, *added]

        return self.store.change(change).addCallback(lambda _: added)

    def remove(self, flt: AclFilter) -> Deferred[list[AclBinding]]:
        """Remove every binding ``flt`` matches; fires with them."""
        gone: list[AclBinding] = []

        def change(before: list[AclBinding]) -> list[AclBinding]:
            gone[:] = sorted(a for a in before if flt.matches(a))
            return [a for a in before if not flt.matches(a)]

        return self.store.change(change).addCallback(lambda _: gone)
