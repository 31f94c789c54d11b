"""Iggy's numeric status codes: every non-zero status the Iggy transport sends, and the
refusal that carries one.

Owns: ``Status`` (the codes, numbered exactly as Iggy's ``IggyError`` discriminants, which
never change meaning: a retired code is a gap, never reused) and ``IggyError`` (a refusal
carrying one status; the transport answers it as a status with an empty payload). Which
status answers which of Skerry's own exceptions is ``broker.iggy.errors``' table.

A status travels alone: ``u32 status, u32 length = 0`` and no payload (the seed: "in case
of errors, the length will be always equal to 0"). Messages stay in the broker's log.

Must not import: Twisted, the store, sockets, ``broker.errors``, anything else of the Iggy
package.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Status", "IggyError"]


class Status(IntEnum):
    """Iggy's status codes (``core/common/src/error/iggy_error.rs``) that Skerry sends."""

    OK = 0
    ERROR = 1
    INVALID_COMMAND = 3
    INVALID_FORMAT = 4
    FEATURE_UNAVAILABLE = 5
    INVALID_IDENTIFIER = 6
    RESOURCE_NOT_FOUND = 20
    UNAUTHENTICATED = 40
    UNAUTHORIZED = 41
    INVALID_CREDENTIALS = 42
    INVALID_USERNAME = 43
    INVALID_PASSWORD = 44
    INVALID_USER_STATUS = 45
    USER_ALREADY_EXISTS = 46
    USER_INACTIVE = 47
    CANNOT_DELETE_USER = 48
    CANNOT_CHANGE_PERMISSIONS = 49
    INVALID_PERSONAL_ACCESS_TOKEN_NAME = 50
    PERSONAL_ACCESS_TOKEN_ALREADY_EXISTS = 51
    PERSONAL_ACCESS_TOKENS_LIMIT_REACHED = 52
    INVALID_PERSONAL_ACCESS_TOKEN = 53
    PERSONAL_ACCESS_TOKEN_EXPIRED = 54
    USERS_LIMIT_REACHED = 55
    INVALID_PERSONAL_ACCESS_TOKEN_EXPIRY = 56
    INVALID_UTF8 = 81
    INVALID_NUMBER_ENCODING = 82
    INVALID_BOOLEAN_VALUE = 83
    CLIENT_NOT_FOUND = 100
    INVALID_CLIENT_ID = 101
    CANNOT_DELETE_STREAM = 1007
    STREAM_ID_NOT_FOUND = 1009
    STREAM_NAME_NOT_FOUND = 1010
    STREAM_NAME_ALREADY_EXISTS = 1012
    INVALID_STREAM_NAME = 1013
    INVALID_STREAM_ID = 1014
    TOO_MANY_STREAMS = 1020
    TOPIC_ID_NOT_FOUND = 2010
    TOPIC_NAME_NOT_FOUND = 2011
    TOPIC_NAME_ALREADY_EXISTS = 2013
    INVALID_TOPIC_NAME = 2014
    TOO_MANY_PARTITIONS = 2015
    INVALID_REPLICATION_FACTOR = 2018
    INVALID_PARTITIONS_COUNT = 2019
    TOO_MANY_TOPICS = 2021
    PARTITION_NOT_FOUND = 3007
    CONSUMER_OFFSET_NOT_FOUND = 3021
    SEGMENT_NOT_FOUND = 4000
    INVALID_MESSAGES_COUNT = 4009
    CANNOT_APPEND_MESSAGE = 4010
    CANNOT_READ_HEADERS_PAYLOAD = 4016
    TOO_BIG_USER_HEADERS = 4017
    TOO_BIG_MESSAGE_PAYLOAD = 4022
    EMPTY_MESSAGE_PAYLOAD = 4024
    INVALID_KEY_VALUE_LENGTH = 4028
    INVALID_SEGMENTS_COUNT = 4030
    INVALID_INDEXES_COUNT = 4035
    INVALID_MESSAGES_SIZE = 4036
    TOO_SMALL_MESSAGE = 4037
    INVALID_OFFSET = 4100
    INVALID_RESERVED_FIELD = 4101
    CONSUMER_GROUP_ID_NOT_FOUND = 5000
    CONSUMER_GROUP_NAME_NOT_FOUND = 5003
    CONSUMER_GROUP_NAME_ALREADY_EXISTS = 5004
    INVALID_CONSUMER_GROUP_NAME = 5005
    CONSUMER_GROUP_MEMBER_NOT_FOUND = 5006
    CONSUMER_GROUP_PARTITION_NOT_OWNED = 5009
    TASK_TIMEOUT = 12001
    IO_ERROR = 13000


class IggyError(Exception):
    """A refusal answered with ``status`` and an empty payload; ``message`` is for the log."""

    def __init__(self, status: Status, message: str | None = None) -> None:
        self.status = Status(status)
        self.message = message or self.status.name.lower()
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"IggyError({self.status.name}, {self.message!r})"
