"""The Iggy transport's users, their permissions and personal access tokens: a service the
shell builds and the Iggy handlers call, persisted in the data dir.

Owns: ``UserStore`` and ``iggy-users.json`` (every user: id, username, scrypt password hash, status,
created_at, and their personal access tokens stored only as SHA-256 hashes; a user's
``permissions`` blob is kept only until the Iggy service migrates it into ACL bindings,
see ``legacy_permissions``),
the password hashing (``hash_password``/``verify_password``: scrypt, a random 16-byte salt
per hash, parameters stored with it), the validation rules (Iggy's: usernames 3-50
characters, passwords 3-100, token names 3-30, at most 100 tokens per user). What a user
may do is not kept here: Iggy's permissions are ACL bindings (``broker.iggy.access``,
docs/security.md).

The root user (id 0) is created when the file does not exist yet; it has every
permission, cannot be deleted and its permissions cannot change.

Every change is written with ``data.atomic.write_json_atomic`` (tmp, fsync, rename, dir
fsync) before the method returns. Hashing is slow on purpose (scrypt): the handlers run
``hash_password`` and ``verify_password`` off the reactor thread. Everything else here is
quick and runs on it. Refusals are ``broker.services.errors`` classes; the transport picks
their wire codes.

Must not import: Twisted, sockets, the core, the Iggy transport (the ``Permissions`` value,
whose blob is also the stored form, is the access layer's: ``access.iggy_permissions``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from access.errors import InvalidPermissions
from access.iggy_permissions import Permissions
from broker.services.errors import (
    InvalidPassword,
    InvalidTokenExpiry,
    InvalidTokenName,
    InvalidUsername,
    InvalidUserStatus,
    RootPermissionsFixed,
    RootUserUndeletable,
    TokenExpired,
    TokenNameTaken,
    TooManyTokens,
    TooManyUsers,
    UnknownToken,
    UnknownTokenName,
    UnknownUser,
    UserInactive,
    UsernameTaken,
)
from data.atomic import read_json, write_json_atomic
from data.fs import OS_FS, FileLayer

__all__ = [
    "USERS_FILE",
    "ROOT_USER_ID",
    "ACTIVE",
    "INACTIVE",
    "User",
    "Token",
    "UserStore",
    "hash_password",
    "verify_password",
    "check_username",
    "check_password",
    "check_status",
]

log = logging.getLogger("skerry.iggy")

USERS_FILE = "iggy-users.json"
ROOT_USER_ID = 0
ACTIVE = 1
INACTIVE = 2
MAX_TOKENS_PER_USER = 100
_FORMAT_VERSION = 1
DEFAULT_SCRYPT_N = 1 << 14


# ---------------------------------------------------------------- hashing


def hash_password(password: str, n: int = DEFAULT_SCRYPT_N, r: int = 8, p: int = 1) -> str:
    """``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>`` for a password (slow: seconds/20)."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                            maxmem=256 * n * r + (1 << 20), dklen=32)
    return "$".join(("scrypt", str(n), str(r), str(p), base64.b64encode(salt).decode(),
                     base64.b64encode(digest).decode()))


def verify_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches ``encoded`` (constant-time comparison)."""
    try:
        scheme, n, r, p, salt, digest = encoded.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(password.encode("utf-8"), salt=base64.b64decode(salt),
                                n=int(n), r=int(r), p=int(p),
                                maxmem=256 * int(n) * int(r) + (1 << 20), dklen=len(expected))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- validation


def check_username(username: str) -> None:
    if not 3 <= len(username) <= 50 or any(ch.isspace() or ord(ch) < 32 for ch in username):
        raise InvalidUsername("a username is 3-50 characters without whitespace")


def check_password(password: str) -> None:
    if not 3 <= len(password) <= 100:
        raise InvalidPassword("a password is 3-100 characters")


def check_status(status: int) -> None:
    if status not in (ACTIVE, INACTIVE):
        raise InvalidUserStatus(f"user status {status}; expected 1 (active) or 2 (inactive)")


def _check_token_name(name: str) -> None:
    if not 3 <= len(name) <= 30 or any(ord(ch) < 32 for ch in name):
        raise InvalidTokenName("a token name is 3-30 printable characters")


# ---------------------------------------------------------------- records


@dataclass
class Token:
    name: str
    token_hash: str
    expiry_at: int | None  # wall-clock microseconds; None = never


@dataclass
class User:
    id: int
    username: str
    password_hash: str
    status: int
    permissions: Permissions | None
    created_at: int
    tokens: dict[str, Token] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.status == ACTIVE

    @property
    def is_root(self) -> bool:
        return self.id == ROOT_USER_ID


class UserStore:
    """The users of the Iggy transport, loaded from and saved to ``iggy-users.json``."""

    def __init__(self, data_dir: str, *, now_us: Callable[[], int], fs: FileLayer = OS_FS,
                 max_users: int = 10_000) -> None:
        self.path = os.path.join(data_dir, USERS_FILE)
        self._now_us = now_us
        self._fs = fs
        self.max_users = max_users
        self.users: dict[int, User] = {}
        self.next_user_id = ROOT_USER_ID
        self._by_token: dict[str, tuple[int, str]] = {}
        doc = read_json(self.path, None, fs)
        if doc is not None:
            try:
                self._from_json(doc)
            except (KeyError, TypeError, ValueError, InvalidPermissions) as exc:
                raise ValueError(f"{self.path}: damaged users file ({exc})") from exc

    @property
    def initialized(self) -> bool:
        """True once the file exists (the root user was created)."""
        return bool(self.users)

    def initialize(self, root_username: str, root_password_hash: str) -> User:
        """Create the file with the root user (first start only)."""
        if self.users:
            raise ValueError("users exist already")
        root = User(ROOT_USER_ID, root_username, root_password_hash, ACTIVE, Permissions.root(),
                    self._now_us())
        self.users[root.id] = root
        self.next_user_id = ROOT_USER_ID + 1
        self.save()
        log.info("iggy: created the root user %r in %s", root_username, self.path)
        return root

    # ------------------------------------------------------------------ persistence

    def _from_json(self, doc: Any) -> None:
        if not isinstance(doc, dict) or doc.get("version") != _FORMAT_VERSION:
            raise ValueError(f"expected an object with version {_FORMAT_VERSION}")
        self.next_user_id = int(doc["next_user_id"])
        for u in doc["users"]:
            perms = u.get("permissions")
            user = User(int(u["id"]), str(u["username"]), str(u["password"]), int(u["status"]),
                        Permissions.decode(bytes.fromhex(perms)) if perms else None,
                        int(u["created_at"]))
            for t in u.get("tokens", []):
                token = Token(str(t["name"]), str(t["hash"]), _opt_int(t.get("expiry_at")))
                user.tokens[token.name] = token
                self._by_token[token.token_hash] = (user.id, token.name)
            self.users[user.id] = user
        if ROOT_USER_ID not in self.users:
            raise ValueError("the root user is missing")

    def save(self) -> None:
        doc = {
            "version": _FORMAT_VERSION,
            "next_user_id": self.next_user_id,
            "users": [
                {
                    "id": u.id, "username": u.username, "password": u.password_hash,
                    "status": u.status, "created_at": u.created_at,
                    "permissions": u.permissions.encode().hex() if u.permissions else None,
                    "tokens": [{"name": t.name, "hash": t.token_hash, "expiry_at": t.expiry_at}
                               for t in sorted(u.tokens.values(), key=lambda t: t.name)],
                }
                for u in sorted(self.users.values(), key=lambda u: u.id)
            ],
        }
        write_json_atomic(self.path, doc, self._fs)

    # ------------------------------------------------------------------ lookups

    def get(self, ident: int | str) -> User | None:
        if isinstance(ident, int):
            return self.users.get(ident)
        return self.by_name(ident)

    def by_name(self, username: str) -> User | None:
        for user in self.users.values():
            if user.username == username:
                return user
        return None

    def list_users(self) -> list[User]:
        """Every user, by id."""
        return sorted(self.users.values(), key=lambda u: u.id)

    def require(self, ident: int | str) -> User:
        user = self.get(ident)
        if user is None:
            raise UnknownUser(f"user {ident} not found")
        return user

    # ------------------------------------------------------------------ changes

    def create(self, username: str, password_hash: str, status: int,
               permissions: Permissions | None) -> User:
        check_username(username)
        check_status(status)
        if self.by_name(username) is not None:
            raise UsernameTaken(f"user {username!r} exists")
        if len(self.users) >= self.max_users:
            raise TooManyUsers(f"at most {self.max_users} users")
        user = User(self.next_user_id, username, password_hash, status, permissions,
                    self._now_us())
        self.users[user.id] = user
        self.next_user_id += 1
        self.save()
        return user

    def update(self, user: User, username: str | None, status: int | None) -> None:
        if username is not None:
            check_username(username)
            other = self.by_name(username)
            if other is not None and other is not user:
                raise UsernameTaken(f"user {username!r} exists")
        if status is not None:
            check_status(status)
            if user.is_root and status != ACTIVE:
                raise InvalidUserStatus("the root user stays active")
        if username is not None:
            user.username = username
        if status is not None:
            user.status = status
        self.save()

    def delete(self, user: User) -> None:
        if user.is_root:
            raise RootUserUndeletable("the root user cannot be deleted")
        for token in user.tokens.values():
            self._by_token.pop(token.token_hash, None)
        del self.users[user.id]
        self.save()

    def legacy_permissions(self) -> list[User]:
        """Users (not root) whose file still holds an Iggy permissions blob: written by a
        Skerry before the ACLs, to be migrated once (``forget_permissions`` after)."""
        return [u for u in self.list_users() if not u.is_root and u.permissions is not None]

    def forget_permissions(self, user: User) -> None:
        """Drop the blob once it lives on as ACL bindings."""
        if user.is_root:
            raise RootPermissionsFixed("the root user's permissions cannot change")
        user.permissions = None
        self.save()

    def set_password_hash(self, user: User, password_hash: str) -> None:
        user.password_hash = password_hash
        self.save()

    # ------------------------------------------------------------------ tokens

    def create_token(self, user: User, name: str, expiry_us: int, now_us: int) -> str:
        """A new token for ``user`` (only its hash is kept). ``expiry_us`` 0 or u64::MAX
        means it never expires."""
        _check_token_name(name)
        if name in user.tokens:
            raise TokenNameTaken(f"token {name!r} exists for user {user.id}")
        if len(user.tokens) >= MAX_TOKENS_PER_USER:
            raise TooManyTokens(f"at most {MAX_TOKENS_PER_USER} tokens per user")
        never = expiry_us in (0, (1 << 64) - 1)
        if not never and now_us + expiry_us >= (1 << 64) - 1:
            raise InvalidTokenExpiry("expiry too far")
        raw = secrets.token_urlsafe(36)
        token = Token(name, _token_hash(raw), None if never else now_us + expiry_us)
        user.tokens[name] = token
        self._by_token[token.token_hash] = (user.id, name)
        self.save()
        return raw

    def delete_token(self, user: User, name: str) -> None:
        token = user.tokens.get(name)
        if token is None:
            raise UnknownTokenName(f"no token {name!r}")
        del user.tokens[name]
        self._by_token.pop(token.token_hash, None)
        self.save()

    def tokens(self, user: User, now_us: int) -> list[Token]:
        """The user's tokens that have not expired, by name."""
        return sorted((t for t in user.tokens.values()
                       if t.expiry_at is None or t.expiry_at > now_us), key=lambda t: t.name)

    def login_token(self, raw: str, now_us: int) -> User:
        found = self._by_token.get(_token_hash(raw))
        if found is None:
            raise UnknownToken("unknown token")
        user = self.users.get(found[0])
        token = user.tokens.get(found[1]) if user is not None else None
        if user is None or token is None:
            raise UnknownToken("unknown token")
        if token.expiry_at is not None and token.expiry_at <= now_us:
            raise TokenExpired(f"token {token.name!r} expired")
        if not user.active:
            raise UserInactive(f"user {user.username!r} is inactive")
        return user


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
