"""What the ``skerry`` commands print when the broker refuses: one line in words that says
what to do, instead of the protocol's ``COMMAND: CODE: message``.

Owns: ``explain`` (a ``BrokerError``, or the code and message of an ``ERR`` answer, as one
line for a person: the broker's own words where they already say it, with the next step
where there is one: ``--if-not-exists``, ``$SKERRY_USER``/``$SKERRY_TOKEN``, ``skerry
cluster elect``, ``limits.max_line_bytes``...) and ``ends_produce`` (which refusals are
not about one line but about every line after it, so that ``skerry produce`` stops at the
first one instead of printing it once per line). Every command goes through here: the
admin commands' failures (``broker.cli.run``), each refused line of ``skerry produce``,
and ``skerry consume``.

Must not import: Twisted or the broker's server side; it reads wire codes and messages
only (docs/protocol.md: Error codes).
"""

from __future__ import annotations

from broker.cli.parsers import TOKEN_ENV, USER_ENV
from broker.client.codec import BrokerError, Reply

__all__ = ["AUTH_HINT", "elect_hint", "ends_produce", "explain", "explain_reply", "unknown_topic"]

AUTH_HINT = f"set ${USER_ENV} and ${TOKEN_ENV} (see --help)"


def elect_hint(topic: str | None = None, partition: int | None = None) -> str:
    """What to do about a partition without a leader."""
    where = f"{topic or '<topic>'} {'<partition>' if partition is None else partition}"
    return f"see `skerry cluster status`; force a leader with `skerry cluster elect {where}`"


def explain(exc: BrokerError, topic: str | None = None) -> str:
    """``exc`` in one line of words (``topic``: the topic the command was about)."""
    return _explain(exc.code, exc.broker_message, exc.command, topic)


def explain_reply(reply: Reply, topic: str | None = None, command: str = "") -> str:
    """An ``ERR`` answer in one line of words (as ``explain``)."""
    return _explain(reply.code or "?", reply.payload, command, topic)


def _explain(code: str, message: str, command: str, topic: str | None) -> str:
    if command.startswith("AUTH as "):
        return (f"authentication as {command[len('AUTH as '):]} failed: the broker says "
                f"{message!r}; check ${USER_ENV} and ${TOKEN_ENV}")
    if code == "UNAUTHENTICATED":
        return f"the broker asks for authentication ({message}): {AUTH_HINT}"
    if code == "NOT_AUTHORIZED":
        return (f"not allowed: {message}; an ACL must allow it (`skerry acls add`, "
                "docs/security.md)")
    if code == "BAD_REQUEST":
        return _bad_request(message, topic)
    if code == "NOT_LEADER":
        return f"this broker does not lead the partition ({message}); {elect_hint(topic)}"
    if code == "REPLICATION_TIMEOUT":
        return (f"too few in-sync replicas acknowledged in time ({message}); the message may "
                "still be stored; see `skerry topics describe` for the ISR")
    if code == "UNAVAILABLE":
        return f"the broker cannot take it now ({message}); try again in a moment"
    if code == "STORAGE_ERROR":
        return (f"the broker could not use its disk ({message}); nothing was acknowledged; "
                "see the broker's log")
    if code == "INTERNAL":
        return f"the broker failed on the request ({message}); a bug: see the broker's log"
    if code == "GENERATION_MISMATCH":
        return f"{message} (the group moved on: another generation or member)"
    if code == "UNKNOWN_COMMAND":
        return (f"the broker does not know {command or 'this request'} ({message}); is it "
                "an older Skerry?")
    return f"the broker refused {command or 'the request'}: {code}: {message}"


def _bad_request(message: str, topic: str | None) -> str:
    name = f"topic {topic}" if topic else "the topic"
    if message == "topic already exists":
        return (f"{name} exists already; add --if-not-exists to leave it as it is (exit "
                "status 0)")
    if message == "unknown topic":
        return unknown_topic(topic)
    if message.startswith("line too long"):
        limit = message[len("line too long"):].lstrip(": ") \
            or "over the broker's limits.max_line_bytes"
        return (f"the line is too long for the broker: {limit}; send a smaller value, or "
                "raise that setting in the broker's configuration")
    return message


def unknown_topic(topic: str | None, also: str = "") -> str:
    """The line for a topic the broker does not have; ``also``: a command's own way out."""
    name = f"topic {topic}" if topic else "the topic"
    return (f"{name} does not exist (`skerry topics list` shows the topics; `skerry topics "
            f"create {topic or '<topic>'}` creates it{also})")


def ends_produce(code: str, message: str) -> bool:
    """True for a refusal that every line after it would get too: authentication, ACLs, a
    broker that is stopping or cannot write, an unknown or reserved topic, and an
    over-long line (after which the broker closes the connection)."""
    if code in ("UNAUTHENTICATED", "NOT_AUTHORIZED", "UNAVAILABLE", "STORAGE_ERROR"):
        return True
    return code == "BAD_REQUEST" and (
        message == "unknown topic" or message.startswith("line too long")
        or (message.startswith("topic ") and " is reserved" in message))
