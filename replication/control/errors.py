"""The control plane's refusals, in the control plane's words (no wire codes, no etcd codes).

Owns: ``ControlError`` and its subclasses, raised by the pure rules of
``replication.control`` (key layout, stored values, ISR changes, txn builders).

Must not import: ``broker`` (a domain package never does), Twisted, anything doing I/O;
only ``data.refusal`` (the root every refusal derives from).
"""

from __future__ import annotations

from data.refusal import SkerryError

__all__ = [
    "ControlError",
    "BadKey",
    "MalformedValue",
    "IsrChangeInFlight",
    "NotCaughtUp",
    "InvalidIsr",
    "NotPartitionLeader",
    "IneligibleLeader",
]


class ControlError(SkerryError):
    """Base class of the control plane's errors: refusals in the domain's words (the shell
    answers them as ``BadRequest`` or ``Unavailable``)."""

    description = "refused by the control plane's rules"


class BadKey(ControlError):
    """A key (or a name going into a key) is not one of the layout's shapes."""


class MalformedValue(ControlError):
    """A value read from etcd is not the JSON document its key holds: a peer's bug or a
    foreign writer under our prefix, never ours to guess around."""


class IsrChangeInFlight(ControlError):
    """An ISR change was proposed while another one's txn had not answered yet (one in
    flight per partition, as Kafka's AlterPartition)."""


class NotCaughtUp(ControlError):
    """A follower was proposed for the ISR before its progress reached the high watermark."""


class InvalidIsr(ControlError):
    """A proposed ISR that no rule allows: empty, without its leader, or naming a broker
    outside the partition's replica list."""


class NotPartitionLeader(ControlError):
    """A broker tried to write a partition's ISR without being the leader the key names."""


class IneligibleLeader(ControlError):
    """A forced election named a leader the rules refuse: not a replica, not alive, or
    outside the committed ISR while unclean election is off."""
