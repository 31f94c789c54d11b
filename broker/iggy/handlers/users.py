"""The Iggy user commands: users, logins and personal access tokens.

Owns: ``UserHandlers``: GetUser, GetUsers, CreateUser, DeleteUser, UpdateUser,
UpdatePermissions, ChangePassword, LoginUser, LogoutUser and the token commands
(GetPersonalAccessTokens, CreatePersonalAccessToken, DeletePersonalAccessToken,
LoginWithPersonalAccessToken). Password hashing runs through the injected
``run_in_thread`` (scrypt is slow on purpose); unknown usernames are checked against a
dummy hash so they take as long as known ones. Users and tokens are kept by
``broker.services.iggy_users.UserStore``.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging
import secrets

from twisted.internet.defer import Deferred

from broker.iggy import codec as c
from broker.iggy.access import Need
from broker.iggy.codec import Identifier, TokenInfo, UserInfo
from broker.iggy.errors import IggyError, Status
from broker.iggy.handlers.context import Context, Session
from broker.iggy.handlers.sessions import Sessions
from broker.services.errors import RootPermissionsFixed
from broker.services.iggy_users import (
    ACTIVE,
    User,
    check_password,
    check_status,
    check_username,
    hash_password,
    verify_password,
)

__all__ = ["UserHandlers"]

log = logging.getLogger("skerry.iggy")


class UserHandlers:
    """Users, logins and personal access tokens."""

    def __init__(self, ctx: Context, sessions: Sessions) -> None:
        self.ctx = ctx
        self.users = ctx.users
        self.sessions = sessions
        self._dummy_hash: str | None = None

    # ================================================================ users

    def get_user(self, session: Session, user: User, cmd: c.GetUser) -> bytes:
        found = self.users.get(cmd.user_id.value)
        if found is None or found.id != user.id:
            self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        if found is None:
            return b""
        return c.encode_user_details(_user_info(found), self.ctx.permissions_of(found))

    def get_users(self, session: Session, user: User, cmd: c.GetUsers) -> bytes:
        self.ctx.need(session, Need.DESCRIBE_CLUSTER)
        return b"".join(c.encode_user(_user_info(u)) for u in self.users.list_users())

    def create_user(self, session: Session, user: User, cmd: c.CreateUser) -> Deferred[bytes]:
        self.ctx.need(session, Need.ALTER_CLUSTER)
        check_username(cmd.username)
        check_password(cmd.password)
        check_status(cmd.status)
        if self.users.by_name(cmd.username) is not None:
            raise IggyError(Status.USER_ALREADY_EXISTS, f"user {cmd.username!r} exists")
        n = self.ctx.scrypt_n

        def created(password_hash: str) -> Deferred[bytes]:
            new = self.users.create(cmd.username, password_hash, cmd.status, None)
            log.info("iggy: user %s created user %r (id %d)", user.username, new.username, new.id)
            return self.ctx.write_permissions(new.username, cmd.permissions).addCallback(
                lambda _: c.encode_user_details(_user_info(new), cmd.permissions))

        return self.ctx.run_in_thread(lambda: hash_password(cmd.password, n)).addCallback(created)

    def delete_user(self, session: Session, user: User, cmd: c.DeleteUser) -> Deferred[bytes]:
        self.ctx.need(session, Need.ALTER_CLUSTER)
        target = self._target_user(cmd.user_id)
        self.users.delete(target)
        self.sessions.log_out_user(target.id)
        log.info("iggy: user %s deleted user %r", user.username, target.username)
        return self.ctx.write_permissions(target.username, None).addCallback(lambda _: b"")

    def update_user(self, session: Session, user: User,
                    cmd: c.UpdateUser) -> bytes | Deferred[bytes]:
        """A rename moves the user's ACL bindings to the new name."""
        self.ctx.need(session, Need.ALTER_CLUSTER)
        target = self._target_user(cmd.user_id)
        old = target.username
        self.users.update(target, cmd.username, cmd.status)
        if target.is_root or target.username == old:
            return b""
        return self.ctx.rename_principal(old, target.username).addCallback(lambda _: b"")

    def update_permissions(self, session: Session, user: User,
                           cmd: c.UpdatePermissions) -> Deferred[bytes]:
        """Iggy's permissions become the user's ACL bindings (``broker.iggy.access``);
        open connections see them at their next request."""
        self.ctx.need(session, Need.ALTER_CLUSTER)
        target = self._target_user(cmd.user_id)
        if target.is_root:
            raise RootPermissionsFixed("the root user's permissions cannot change")
        log.info("iggy: user %s set the permissions of %r", user.username, target.username)
        return self.ctx.write_permissions(target.username, cmd.permissions).addCallback(
            lambda _: b"")

    def change_password(self, session: Session, user: User,
                        cmd: c.ChangePassword) -> Deferred[bytes]:
        target = self._target_user(cmd.user_id)
        if target.id != user.id:
            self.ctx.need(session, Need.ALTER_CLUSTER)
        check_password(cmd.new_password)
        encoded = target.password_hash
        n = self.ctx.scrypt_n

        def work() -> str | None:
            if not verify_password(cmd.current_password, encoded):
                return None
            return hash_password(cmd.new_password, n)

        def done(new_hash: str | None) -> bytes:
            if new_hash is None:
                raise IggyError(Status.INVALID_CREDENTIALS, "current password does not match")
            if self.users.get(target.id) is target:
                self.users.set_password_hash(target, new_hash)
            return b""

        return self.ctx.run_in_thread(work).addCallback(done)

    # ================================================================ logins

    def login_user(self, session: Session, user: User | None,
                   cmd: c.LoginUser) -> Deferred[bytes]:
        found = self.users.by_name(cmd.username)
        known = found.password_hash if found is not None else None

        def done(ok: bool) -> bytes:
            current = self.users.by_name(cmd.username)
            if not ok or current is None or current is not found:
                log.info("iggy: client %d (%s) failed to log in as %r", session.client_id,
                         session.address, cmd.username)
                raise IggyError(Status.INVALID_CREDENTIALS, "invalid username or password")
            if current.status != ACTIVE:
                raise IggyError(Status.USER_INACTIVE, f"user {cmd.username!r} is inactive")
            session.user_id = current.id
            log.debug("iggy: client %d logged in as %r", session.client_id, current.username)
            return c.encode_identity(current.id)

        return self.ctx.run_in_thread(
            lambda: verify_password(cmd.password, known or self._dummy())).addCallback(done)

    def logout_user(self, session: Session, user: User, cmd: c.LogoutUser) -> bytes:
        session.user_id = None
        return b""

    # ================================================================ tokens

    def get_tokens(self, session: Session, user: User, cmd: c.GetPersonalAccessTokens) -> bytes:
        return b"".join(c.encode_token(TokenInfo(t.name, t.expiry_at))
                        for t in self.users.tokens(user, self.ctx.now_us()))

    def create_token(self, session: Session, user: User,
                     cmd: c.CreatePersonalAccessToken) -> bytes:
        raw = self.users.create_token(user, cmd.name, cmd.expiry, self.ctx.now_us())
        return c.encode_raw_token(raw)

    def delete_token(self, session: Session, user: User,
                     cmd: c.DeletePersonalAccessToken) -> bytes:
        if cmd.name not in user.tokens:
            raise IggyError(Status.RESOURCE_NOT_FOUND, f"no token {cmd.name!r}")
        self.users.delete_token(user, cmd.name)
        return b""

    def login_token(self, session: Session, user: User | None,
                    cmd: c.LoginWithPersonalAccessToken) -> bytes:
        found = self.users.login_token(cmd.token, self.ctx.now_us())
        session.user_id = found.id
        return c.encode_identity(found.id)

    # ================================================================ helpers

    def _target_user(self, ident: Identifier) -> User:
        return self.users.require(ident.value)

    def _dummy(self) -> str:
        """A hash to check unknown usernames against, so that they take as long as known
        ones (runs in the worker thread; a benign race computes it twice at most)."""
        if self._dummy_hash is None:
            self._dummy_hash = hash_password(secrets.token_hex(8), self.ctx.scrypt_n)
        return self._dummy_hash


def _user_info(u: User) -> UserInfo:
    return UserInfo(u.id, u.created_at, u.status, u.username)
