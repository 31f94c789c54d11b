"""The control plane's etcd session: the lease granted and kept alive, the broker's registration bound to it, renewal when etcd says the lease is gone, and the session file that lets the next run revoke this run's lease.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from broker.errors import Unavailable
from broker.services.control.base import RETRY_S, log, run_logged
from broker.services.etcd import (
    EtcdUnavailable,
    Header,
    LeaseKeeper,
    LeaseNotFound,
    OutcomeUnknown,
)
from data.atomic import read_json, write_json_atomic
from replication.control.keys import (
    BrokerRegistration,
)
from replication.control.txn import (
    register_broker,
)


class SessionFile:
    """``<data_dir>/cluster-session.json``: ``{"lease": id, "incarnation": n}`` of the
    current session, replaced atomically (``data.atomic``) so a crash leaves the old or the
    new session, never a torn one. A missing or unreadable file reads as ``(0, 0)``: no
    lease to revoke, the first incarnation."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[int, int]:
        """(lease, incarnation) of the previous run; (0, 0) when there is none."""
        try:
            doc = read_json(str(self.path), {})
            return int(doc.get("lease", 0)), int(doc.get("incarnation", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            return 0, 0

    def write(self, lease: int, incarnation: int) -> None:
        """Record the session durably (before the broker registers with the lease)."""
        write_json_atomic(str(self.path), {"lease": lease, "incarnation": incarnation})


class EtcdSession:
    """Part of ``ControlPlane`` (module docstring): opening and renewing the session, and every etcd call's bookkeeping (term and revision seen)."""

    def write_refusal(self) -> str | None:
        """Why this broker takes no write now (None: it may): its etcd session is lost, or
        (``fence_writes_on_session_loss``) no keepalive answered within the TTL."""
        if self._session_lost:
            return "this broker's etcd session (lease) was lost; it is registering again"
        keeper = self.keeper
        if self.settings.fence_writes_on_session_loss and keeper is not None \
                and self.clock.seconds() > keeper.expires_by:
            return ("no etcd keepalive answered within the lease TTL "
                    "(fence_writes_on_session_loss)")
        return None

    async def _call(self, d: Deferred[Any]) -> Any:
        """One etcd call; unreachable etcd is ``Unavailable`` for the callers of the API."""
        try:
            result = await d
        except EtcdUnavailable as exc:
            raise Unavailable(f"etcd unreachable: {exc}") from None
        except OutcomeUnknown as exc:
            raise Unavailable(f"etcd did not answer; the change may or may not have been "
                              f"applied (read before retrying): {exc}") from None
        header = getattr(result, "header", None)
        if isinstance(header, Header):
            self._note(header)
        return result

    def _note(self, header: Header) -> None:
        if header.raft_term:
            self._term = max(self._term, header.raft_term)
        self.view.revision = max(self.view.revision, header.revision)

    async def _retrying(self, make: Callable[[], Deferred[Any]], what: str) -> Any:
        """Run ``make()`` until etcd answers (startup and session renewal)."""
        while not self._stopped:
            try:
                return await make()
            except (EtcdUnavailable, OutcomeUnknown) as exc:
                log.warning("%s: %s; retrying", what, exc)
            await deferLater(self.clock, RETRY_S, lambda: None)
        raise Unavailable("control plane stopped")

    async def _open_session(self) -> None:
        old_lease, incarnation = self.session_file.read()
        if old_lease:
            try:
                await self._retrying(lambda: self.client.revoke(old_lease),
                                     "revoking the previous etcd lease")
                log.info("revoked the previous run's etcd lease %x", old_lease)
            except LeaseNotFound:
                pass  # already expired or revoked: nothing left to revoke
        self.incarnation = incarnation + 1
        lease, ttl = await self._retrying(
            lambda: self.client.grant(self.settings.lease_ttl_s), "granting an etcd lease")
        self.lease = lease
        self._reported.clear()      # the old lease's reports went with it
        self.session_file.write(self.lease, self.incarnation)
        self.keeper = LeaseKeeper(self.client, lease, ttl, self._lease_lost)
        self.keeper.start()
        registration = BrokerRegistration(str(self.cluster.address(self.broker_id)),
                                          self.incarnation)
        txn = register_broker(self.layout, self.broker_id, registration, lease)
        while not self._stopped:
            result = await self._retrying(lambda: self.client.txn(txn),
                                          "registering in etcd")
            self._note(result.header)
            holder = result.reads[0] if result.reads else None
            if result.succeeded or (holder and holder[0].lease == lease):
                log.info("registered as broker %d in etcd (lease %x, ttl %d s, incarnation "
                         "%d)", self.broker_id, lease, ttl, self.incarnation)
                return
            log.warning("broker id %d is registered in etcd by another lease; waiting for "
                        "it to expire", self.broker_id)
            await deferLater(self.clock, 1.0, lambda: None)

    def _lease_lost(self, lease_id: int) -> None:
        if self._stopped or lease_id != self.lease:
            return
        log.warning("etcd lease %x is gone (this broker was cut off longer than the TTL); "
                    "refusing writes and registering again", lease_id)
        self._session_ok = False
        self._session_lost = True
        run_logged(self._renew())

    async def _renew(self) -> None:
        await self._open_session()
        await self._load()
        self._session_lost = False
        self._session_ok = True
        self._registered_myself()
        self._try_claim()
