"""The connected Iggy clients and their consumer-group memberships.

Owns: ``Sessions``: opening and closing a client's ``Session`` (client ids count from 1),
the V1 member id that stands for a client in a group (``iggy-<boot>-<client id>``: a new
``boot`` per process, so members a previous run left behind are recognised and removed at
start), joining, leaving and committing as that member through the context's
``GroupRouter`` (at the group's coordinator on a cluster), the
heartbeat that keeps memberships alive (Iggy clients send none), and forgetting every
group of a store topic that goes away.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import Any

from twisted.internet.defer import Deferred

from broker.errors import SkerryError
from broker.iggy.errors import IggyError, Status
from broker.iggy.handlers.context import Context, Membership, Session, all_done, logged
from broker.services.group_router import GroupView
from data.keys import fnv1a_32

__all__ = ["Sessions"]

log = logging.getLogger("skerry.iggy")

_IGGY_MEMBER = re.compile(r"iggy-[0-9a-f]+-([0-9]{1,10})")
"""An Iggy client's member id: ``iggy-<boot>-<client id>``."""


class Sessions:
    """Every connected client of one Iggy transport, by client id."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.boot = secrets.token_hex(4)
        self._by_id: dict[int, Session] = {}
        self._next_client_id = 1

    # ================================================================ clients

    def new(self, address: str) -> Session:
        """A new client connected from ``address``: its session, with the next client id."""
        session = Session(self._next_client_id, address)
        self._next_client_id += 1
        self._by_id[session.client_id] = session
        return session

    def end(self, session: Session) -> None:
        """The connection closed: leave its consumer groups."""
        session.closed = True
        self._by_id.pop(session.client_id, None)
        if self.ctx.core.closing:
            return
        for membership in list(session.memberships.values()):
            try:
                logged(self.leave(session, membership), "leaving a group")
            except SkerryError as error:
                log.info("iggy: client %d leaving %s on %s: %s", session.client_id,
                         membership.group, membership.store, error.message)
        session.memberships.clear()

    def get(self, client_id: int) -> Session | None:
        return self._by_id.get(client_id)

    def all(self) -> list[Session]:
        """Every connected client, by client id."""
        return sorted(self._by_id.values(), key=lambda s: s.client_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def log_out_user(self, user_id: int) -> None:
        """Every client logged in as ``user_id`` is logged out (the user was deleted)."""
        for session in self._by_id.values():
            if session.user_id == user_id:
                session.user_id = None

    # ================================================================ member ids

    def member_prefix(self) -> str:
        return f"iggy-{self.boot}-"

    def member_id(self, session: Session) -> str:
        return f"{self.member_prefix()}{session.client_id}"

    def member_client(self, member: str) -> int:
        """The client id a member id stands for (an Iggy member of any broker of a cluster:
        each numbers its clients in a range of its own, see ``number_clients_from``); a V1
        member gets a hash with the top bit set, which no Iggy client id has."""
        match = _IGGY_MEMBER.fullmatch(member)
        if match is not None and int(match.group(1)) < 0x80000000:
            return int(match.group(1))
        return fnv1a_32(member.encode("utf-8")) | 0x80000000

    def number_clients_from(self, broker_id: int) -> None:
        """(A cluster member) Number this broker's clients from ``broker_id * 2**24 + 1``,
        so an Iggy member's client id names one client in the whole cluster (group
        descriptions answer the same on every broker)."""
        if self._next_client_id == 1:
            self._next_client_id = (broker_id << 24) + 1

    # ================================================================ memberships

    def join(self, session: Session, membership: Membership) -> Deferred[None]:
        """Join the group as ``session``'s member (at the group's coordinator); the
        membership is recorded once the coordinator has the member (unless the client left
        meanwhile)."""
        key = (membership.store, membership.group)
        d = self.ctx.router.join(membership.group, membership.store, self.member_id(session),
                                 session_timeout_ms=self.ctx.session_timeout_ms)

        def joined(_: object) -> None:
            if not session.closed and key not in session.memberships:
                session.memberships[key] = membership

        return d.addCallback(joined)

    def leave(self, session: Session, membership: Membership) -> Deferred[None]:
        session.memberships.pop((membership.store, membership.group), None)
        router = self.ctx.router
        member = self.member_id(session)

        def seen(view: GroupView | None) -> Deferred[None] | None:
            if view is None or member not in view.members:
                return None
            return router.leave(membership.group, membership.store, member, view.generation)

        return router.view(membership.group, membership.store).addCallback(seen)

    def assigned(self, session: Session, group: str, store: str) -> Deferred[list[int]]:
        """The partitions of ``store`` the group gives ``session``'s member now."""
        member = self.member_id(session)
        return self.ctx.router.view(group, store).addCallback(
            lambda view: view.assigned(member) if view is not None else [])

    def commit(self, session: Session, group: str, store: str, partition: int,
               next_offset: int) -> Deferred[None]:
        """Store ``next_offset`` (V1's "next to read") for ``group``: as a member when this
        client is one, as an admin write when the group has no live members."""
        router = self.ctx.router
        member = self.member_id(session)

        def seen(view: GroupView | None) -> Deferred[None]:
            if view is not None and member in view.members:
                return router.commit(group, store, member, view.generation, partition,
                                     next_offset)
            if view is None or not view.members:
                return router.admin_commit(group, store, partition, next_offset)
            raise IggyError(Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
                            f"client {session.client_id} is not a member of group {group}")

        return router.view(group, store).addCallback(seen)

    def forget_groups(self, store: str) -> Deferred[None]:
        """Leave and delete every group (and stored offsets) of a store topic going away."""
        router = self.ctx.router
        waits = []
        for session in list(self._by_id.values()):
            for membership in list(session.memberships.values()):
                if membership.store == store:
                    waits.append(self.leave(session, membership).addErrback(
                        lambda f, m=membership: log.info(
                            "iggy: leaving %s on %s: %s", m.group, store,
                            f.getErrorMessage())))

        def delete(pairs: list[tuple[str, str]]) -> Deferred[None]:
            deletes = []
            for group, topic in pairs:
                if topic == store:
                    d = router.delete_group(group, topic)
                    d.addErrback(lambda f, g=group: log.warning(
                        "iggy: group %s on %s stays: %s", g, store, f.getErrorMessage()))
                    deletes.append(d)
            return all_done(deletes)

        leaves = all_done(waits)
        if router.is_single():  # the leaves took effect already: delete at once
            return all_done([leaves, router.list_groups().addCallback(delete)])
        # Members leave first (at their coordinators), so the groups are empty when deleted.
        return leaves.addCallback(lambda _: router.list_groups()).addCallback(delete)

    # ================================================================ timers and start

    def heartbeat(self) -> None:
        """Refresh the group membership of every connected client (the shell calls this
        every third of the session timeout: Iggy clients send no group heartbeats), and
        rejoin a membership the coordinator lost."""
        if self.ctx.core.closing:
            return
        for session in list(self._by_id.values()):
            for membership in list(session.memberships.values()):
                logged(self._refresh(session, membership), f"refreshing client "
                       f"{session.client_id} in {membership.group} on {membership.store}")

    def _refresh(self, session: Session, membership: Membership) -> Deferred[None]:
        router = self.ctx.router
        member = self.member_id(session)
        group, store = membership.group, membership.store

        def seen(view: GroupView | None) -> Deferred[Any]:
            if view is not None and member in view.members:
                return router.heartbeat(group, store, member, view.generation)
            return router.join(group, store, member,
                               session_timeout_ms=self.ctx.session_timeout_ms)

        return router.view(group, store).addCallback(seen)

    def remove_stale_members(self) -> None:
        """Drop group members a previous run of the Iggy transport left behind (their
        connections are gone; a restored member would otherwise hold its partitions until
        its session timed out)."""
        groups = self.ctx.groups
        for name, topic in groups.list_groups():
            grp = groups.group(name, topic)
            if grp is None:
                continue
            for member in sorted(grp.members):
                if member.startswith("iggy-") and not member.startswith(self.member_prefix()):
                    try:
                        logged(groups.leave(name, topic, member, grp.generation),
                               "removing a stale member")
                        log.info("iggy: removed stale member %s of group %s on %s", member,
                                 name, topic)
                    except SkerryError as error:
                        log.warning("iggy: could not remove stale member %s: %s", member,
                                    error.message)
