"""V1 authentication: the token file, token checks, the failed-attempt delay and the
rule that a broker reachable from other machines must ask for authentication.

Owns: the tokens file format (one ``<user>:<sha256 hex of the token>`` per line, ``#``
comments), verifying ``AUTH <user> <token>`` with ``hmac.compare_digest`` against the stored
hash (tokens are 256-bit random strings, so a plain SHA-256 is enough: there is nothing to
brute-force that a slow hash would protect), the per-connection back-off after a failure,
and ``bind_refusal`` (the message the server prints before exiting with code 2).

Never logs or returns a token, and never keeps one in memory beyond the check.

Also reads a broker's own peer token (``read_peer_token``: the file named by
``cluster.peer_token_file``, which only its owner may read), which replication sends as
``AUTH <peer user> <token>`` to the other brokers.

Changing the file: ``add_user`` makes a random token, appends its hash to the file (created
with mode 0600) and returns the token, to be shown once; ``remove_user`` takes a user's
line out (the file is replaced atomically, comments kept). ``skerry auth add|remove|list``
(``broker.cli.main``) and ``python -m broker.auth add <user> <tokens_file>`` call them. A
running broker reads the file when it starts.

Must not import: Twisted, sockets, the store. (The handler schedules the delay on the
reactor clock; this module only computes it.)
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import sys
from collections.abc import Mapping, Sequence

from data.names import NAME_PATTERN

__all__ = [
    "AuthFileError",
    "TokenStore",
    "hash_token",
    "new_token",
    "failure_delay",
    "is_loopback",
    "bind_refusal",
    "read_peer_token",
    "add_user",
    "remove_user",
    "list_users",
    "main",
]

_USER_RE = re.compile(NAME_PATTERN)
_HASH_RE = re.compile(r"[0-9a-f]{64}")
_DUMMY_HASH = "0" * 64

FIRST_DELAY_S = 0.25
"""The delay before the answer to a connection's first failed AUTH."""
MAX_DELAY_S = 8.0
"""The delay doubles with each further failure on the same connection, up to this."""


class AuthFileError(ValueError):
    """The tokens file is missing or malformed; the message names the file and line."""


def hash_token(token: str) -> str:
    """The stored form of a token: SHA-256, lower-case hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe base64: no spaces, '|' or ',')."""
    return secrets.token_urlsafe(32)


def failure_delay(failures: int) -> float:
    """Seconds to wait before answering the ``failures``-th failed AUTH of one connection:
    0.25, 0.5, 1, 2, 4, 8, 8, ... (failures >= 1)."""
    return min(FIRST_DELAY_S * 2 ** max(0, min(failures - 1, 16)), MAX_DELAY_S)


class TokenStore:
    """The users allowed in and the hash of each one's token."""

    def __init__(self, hashes: Mapping[str, str]) -> None:
        for user, digest in hashes.items():
            if not _USER_RE.fullmatch(user):
                raise AuthFileError(f"invalid user name {user!r}")
            if not _HASH_RE.fullmatch(digest):
                raise AuthFileError(f"user {user}: expected 64 hex digits of SHA-256")
        self._hashes = dict(hashes)

    @property
    def users(self) -> list[str]:
        return sorted(self._hashes)

    def verify(self, user: str, token: str) -> bool:
        """True when ``token`` is ``user``'s. Takes the same time for an unknown user."""
        stored = self._hashes.get(user)
        given = hash_token(token)
        match = hmac.compare_digest(given, stored if stored is not None else _DUMMY_HASH)
        return match and stored is not None

    @classmethod
    def from_file(cls, path: str) -> TokenStore:
        """Load ``<user>:<sha256 hex>`` lines; blank lines and ``#`` comments are skipped."""
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise AuthFileError(f"{path}: cannot read ({exc.strerror})") from None
        hashes: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            user, colon, digest = line.partition(":")
            if not colon or not _USER_RE.fullmatch(user) or not _HASH_RE.fullmatch(digest):
                # The line might hold a pasted token: never echo it.
                raise AuthFileError(f"{path}:{number}: expected <user>:<64 hex digits> "
                                    "(skerry auth add <user> <file> writes one)")
            if user in hashes:
                raise AuthFileError(f"{path}:{number}: user {user} appears twice")
            hashes[user] = digest
        if not hashes:
            raise AuthFileError(f"{path}: no users; nobody could log in")
        return cls(hashes)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_refusal(host: str, auth_configured: bool) -> str | None:
    """The one-line refusal for listening on ``host`` without authentication, or None."""
    if auth_configured or is_loopback(host):
        return None
    return (f"refusing to listen on {host} without authentication: any machine that reaches "
            f"it could read and write every topic. Set auth.tokens_file (create one with "
            f"`python -m broker.auth add <user> <file>`; see README.md, Security) or listen "
            f"on 127.0.0.1")


_TOKEN_RE = re.compile(r"[!-~]+")
"""A token on the wire: printable ASCII without spaces (``|`` excluded below)."""


def read_peer_token(path: str, key: str = "cluster.peer_token_file") -> str:
    """The token in ``path`` (its first line), for ``cluster.peer_token_file`` (or the
    secret file named by ``key``, e.g. ``cluster.etcd.password_file``).

    ``AuthFileError`` with one line when the file cannot be read, holds no usable token,
    or can be read by anyone but its owner (mode 0600 or 0400): a token other local users
    can read lets them act as a broker. The message never contains the token."""
    where = f"{key}: {path}"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise AuthFileError(f"{where}: cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode & 0o777
        if mode & 0o077:
            raise AuthFileError(f"{where}: mode {mode:04o} lets other users read the broker's "
                                f"token; make it 0600 (chmod 600 {path})")
        text = handle.read(4096)
    line = text.decode("utf-8", "replace").strip().split("\n", 1)[0].strip()
    if not _TOKEN_RE.fullmatch(line) or "|" in line:
        raise AuthFileError(f"{where}: expected the token on the first line (printable "
                            f"characters, no spaces or '|')")
    return line


def list_users(path: str) -> list[str]:
    """The users of a tokens file, sorted; ``AuthFileError`` when it is missing or
    malformed."""
    return TokenStore.from_file(path).users


def _check_user(user: str) -> None:
    if not _USER_RE.fullmatch(user) or user in (".", ".."):
        raise AuthFileError(f"invalid user name {user!r} (1-249 of A-Z a-z 0-9 . _ -)")


def add_user(path: str, user: str) -> str:
    """Append ``user`` with a new token to the file (created with mode 0600); the token,
    which is nowhere else: show it once. ``AuthFileError`` for an invalid name, a user the
    file has already, or a malformed file."""
    _check_user(user)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        if user in TokenStore.from_file(path).users:
            raise AuthFileError(f"{path}: user {user} exists already (skerry auth remove "
                                f"{user} {path} first to give it a new token)")
    token = new_token()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(f"{user}:{hash_token(token)}\n")
        handle.flush()
        os.fsync(handle.fileno())
    return token


def remove_user(path: str, user: str) -> None:
    """Take ``user``'s line out of the file, keeping every other line (comments included):
    written to ``<path>.tmp`` with the file's mode, fsynced, renamed over it.
    ``AuthFileError`` when the user is not there, or would be the last one (a broker then
    refuses to start: nobody could log in)."""
    users = TokenStore.from_file(path).users
    if user not in users:
        raise AuthFileError(f"{path}: no user {user} (skerry auth list {path} shows them)")
    if users == [user]:
        raise AuthFileError(f"{path}: {user} is its only user; a broker needs at least one "
                            "(add another first, or turn auth.tokens_file off)")
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines(keepends=True)
    kept = "".join(line for line in lines if line.strip().partition(":")[0] != user
                   or line.strip().startswith("#"))
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                 os.stat(path).st_mode & 0o777)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(kept)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m broker.auth add <user> <tokens_file>``: print a new token once (what
    ``skerry auth add`` does)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "add":
        print("usage: python -m broker.auth add <user> <tokens_file> (or: skerry auth add)",
              file=sys.stderr)
        return 2
    try:
        token = add_user(args[2], args[1])
    except AuthFileError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(token)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
