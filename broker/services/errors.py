"""The refusals of the shell's services, in the services' own words.

Owns: ``ServiceError`` and one class per refusal of ``broker.services.iggy_catalog`` (unknown
or badly named streams, topics and consumer groups) and ``broker.services.iggy_users``
(bad usernames and passwords, unknown users and tokens, limits, the root user's rules).
They carry no wire code: each transport maps them onto its own (the Iggy transport in
``broker.iggy.errors``).

Must not import: anything (they are plain classes): not Twisted, not the transports, not
``broker.errors``.
"""

from __future__ import annotations

__all__ = [
    "ServiceError",
    "UnknownStreamId",
    "UnknownStreamName",
    "InvalidStreamName",
    "StreamNameTaken",
    "UnknownTopicId",
    "UnknownTopicName",
    "InvalidTopicName",
    "TopicNameTaken",
    "InvalidGroupName",
    "GroupNameTaken",
    "InvalidUsername",
    "InvalidPassword",
    "InvalidUserStatus",
    "UnknownUser",
    "UsernameTaken",
    "TooManyUsers",
    "RootUserUndeletable",
    "RootPermissionsFixed",
    "UserInactive",
    "InvalidTokenName",
    "UnknownTokenName",
    "TokenNameTaken",
    "TooManyTokens",
    "InvalidTokenExpiry",
    "UnknownToken",
    "TokenExpired",
]


class ServiceError(Exception):
    """A request a service refuses; ``message`` says why, for the log."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------- the Iggy catalog


class UnknownStreamId(ServiceError):
    """No stream has this numeric id."""


class UnknownStreamName(ServiceError):
    """No stream has this name."""


class InvalidStreamName(ServiceError):
    """Not 1-255 bytes of printable UTF-8, or a rename of the default stream."""


class StreamNameTaken(ServiceError):
    """Another stream has this name."""


class UnknownTopicId(ServiceError):
    """The stream has no topic with this numeric id."""


class UnknownTopicName(ServiceError):
    """The stream has no topic with this name."""


class InvalidTopicName(ServiceError):
    """Not 1-255 bytes of printable UTF-8, or not a V1 topic name in the default stream."""


class TopicNameTaken(ServiceError):
    """The stream has a topic with this name."""


class InvalidGroupName(ServiceError):
    """Not 1-255 bytes of printable UTF-8, or a name reserved for plain consumers."""


class GroupNameTaken(ServiceError):
    """The topic has a consumer group with this name."""


# ---------------------------------------------------------------- the Iggy users


class InvalidUsername(ServiceError):
    """Not 3-50 characters without whitespace."""


class InvalidPassword(ServiceError):
    """Not 3-100 characters."""


class InvalidUserStatus(ServiceError):
    """Neither active nor inactive, or the root user made inactive."""


class UnknownUser(ServiceError):
    """No user has this id or name."""


class UsernameTaken(ServiceError):
    """Another user has this name."""


class TooManyUsers(ServiceError):
    """The store holds its maximum number of users."""


class RootUserUndeletable(ServiceError):
    """The root user cannot be deleted."""


class RootPermissionsFixed(ServiceError):
    """The root user's permissions cannot change."""


class UserInactive(ServiceError):
    """The user exists but is inactive."""


class InvalidTokenName(ServiceError):
    """A personal access token name that is not 3-30 printable characters."""


class UnknownTokenName(ServiceError):
    """The user has no token with this name."""


class TokenNameTaken(ServiceError):
    """The user has a token with this name."""


class TooManyTokens(ServiceError):
    """The user holds the maximum number of tokens."""


class InvalidTokenExpiry(ServiceError):
    """The expiry lies beyond what a timestamp holds."""


class UnknownToken(ServiceError):
    """No user holds this token."""


class TokenExpired(ServiceError):
    """The token's expiry has passed."""
