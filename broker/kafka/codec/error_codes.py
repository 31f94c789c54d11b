"""Kafka's wire error codes (int16) as one ``IntEnum``, the table of kafka-wire-notes §2.3.

Owns: ``ErrorCode``. Member names are the notes' names; the older names the notes give in
parentheses are aliases of the same member (``ErrorCode.INVALID_MESSAGE is
ErrorCode.CORRUPT_MESSAGE``). Which Skerry domain error answers as which code is
the future ``broker.kafka.errors`` table's job, not this module's.

Must not import: Twisted, the core, the store, ``broker.errors``, the other codec modules.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode"]


class ErrorCode(IntEnum):
    UNKNOWN = -1
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    INVALID_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_FOR_PARTITION = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    MESSAGE_SIZE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    GROUP_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    GROUP_COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    NOT_COORDINATOR_FOR_GROUP = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    # Beyond the notes' table (Kafka's own names and numbers): record batches v2 and
    # Fetch v4+, the idempotent producer (KIP-98) and the refusal of transactions.
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    UNKNOWN_PRODUCER_ID = 59
    FETCH_SESSION_ID_NOT_FOUND = 70
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 76
    INVALID_RECORD = 87
