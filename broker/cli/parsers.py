"""The ``skerry`` client commands: ``produce``, ``consume``, ``topics`` and ``groups``.

Owns: their argparse subparsers (``add_tool_parsers``, called by ``broker.cli``): every
flag, its default and its help, and the checks of single flag values. Running a command is
``broker.cli.run``'s, imported only then, so that building the parser (for ``skerry
serve`` too) stays cheap.

Every command speaks V1 to the broker named by ``--bootstrap host:port`` (default
``$SKERRY_BOOTSTRAP``, else 127.0.0.1:9092), with ``AUTH`` first when ``--user`` (or
``$SKERRY_USER``) is given (the token comes from ``$SKERRY_TOKEN`` only) and over TLS with
``--tls``/``--cafile``.

Must not import: Twisted or the broker's server side (core, handlers, store, groups,
replication): these are clients, usable against any V1 broker.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from data.names import is_valid_name

__all__ = ["add_tool_parsers"]

USER_ENV = "SKERRY_USER"
TOKEN_ENV = "SKERRY_TOKEN"
BOOTSTRAP_ENV = "SKERRY_BOOTSTRAP"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _name(text: str) -> str:
    if not is_valid_name(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid name (1-249 of A-Z a-z 0-9 . _ -)")
    return text


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, "
                                             f"not {text!r}")
        return int(text)
    return parse


def _offset(text: str) -> str:
    if text in ("earliest", "latest") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(f"expected earliest, latest or an offset, not {text!r}")


def _signed(text: str) -> int:
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number such as -5 or +5, not "
                                         f"{text!r}")
    return int(text)


def _limit(text: str) -> int | None:
    """A retention setting: a whole number >= 1, or ``none`` for no limit (None)."""
    if text == "none":
        return None
    return _count(1)(text)


def _output_format(text: str) -> str:
    """``plain``, ``json`` or a format string (checked when the command runs)."""
    if text in ("plain", "json") or "%" in text:
        return text
    raise argparse.ArgumentTypeError(f"expected plain, json or a format string with %% "
                                     f"tokens (such as '%%k %%s\\n'), not {text!r}")


def _compaction_options(parser: argparse.ArgumentParser, *, alter: bool) -> None:
    """``topics create``/``topics alter``: cleanup policy, compaction and segment settings
    (docs/storage.md, Compaction); an option left out is not sent."""
    keep = {"default": argparse.SUPPRESS}
    parser.add_argument("--cleanup-policy", choices=("delete", "compact", "compact,delete"),
                        help="delete: retention removes old segments (the default); compact: "
                             "keep the latest message of every key; compact,delete: both",
                        **keep)
    parser.add_argument("--min-compaction-lag-ms", type=_count(0), metavar="MS",
                        help="a message is not compacted away before it is this old", **keep)
    parser.add_argument("--delete-retention-ms", type=_count(0), metavar="MS",
                        help="how long a tombstone (empty value) stays readable", **keep)
    parser.add_argument("--segment-bytes", type=_limit if alter else _count(65),
                        metavar="BYTES|none" if alter else "BYTES",
                        help="this topic's segment size (none: the broker's)", **keep)
    parser.add_argument("--segment-ms", type=_limit if alter else _count(1),
                        metavar="MS|none" if alter else "MS",
                        help="this topic's segment age (none: the broker's)", **keep)


COMPACTION_OPTIONS = ("cleanup_policy", "min_compaction_lag_ms", "delete_retention_ms",
                      "segment_bytes", "segment_ms")
"""The ``_compaction_options`` as ``args`` attributes and V1 option names."""


def _lazy(name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of ``broker.cli.run``, imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        from broker.cli import run as tools_run

        return int(getattr(tools_run, name)(args))

    return run


# ------------------------------------------------------------------------------ produce

def _add_produce(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "produce", parents=[common],
        help="send lines from stdin to a topic (key:value, or values with --key)",
        description="Send each line of standard input as one message. A line is "
                    "key:value (split at the first ':'), or, with --key, a value sent under "
                    "that key. Values with spaces, commas, '|' or bytes that are not UTF-8 "
                    "travel base64-encoded (enc=b64) on their own. Blank lines are skipped. "
                    "A progress bar shows on stderr when stdin is a file or a pipe and "
                    "stderr is a terminal. Exit status 1 when any message failed.")
    p.add_argument("topic", type=_name, help="topic to write to (created with the broker's "
                                             "defaults if it does not exist and "
                                             "auto_create_topics is on)")
    p.add_argument("--key", help="send every whole line as a value under this key")
    p.add_argument("--acks", choices=("0", "1", "all"), default="1",
                   help="0: no wait, 1: leader stored it (default), all: in-sync replicas too")
    p.add_argument("--partition", type=_count(0),
                   help="write to this partition instead of the key's hash")
    p.add_argument("--window", type=_count(1), default=5000,
                   help="requests in flight at most (default 5000)")
    p.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar and no summary unless something failed")
    p.set_defaults(func=_lazy("produce_command"))


# ------------------------------------------------------------------------------ consume

def _add_consume(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "consume", parents=[common],
        help="print a topic's messages (once, or following new ones; alone or in a group)",
        description="Print messages of a topic, one per line: the value (plain), a JSON "
                    "object with partition, offset, timestamp (the producer's), append_time "
                    "(the broker's), key, value and headers (--format json; values that "
                    "are not UTF-8 come base64-encoded with \"value_encoding\": "
                    "\"base64\"), or what a kcat-style format string says (--format "
                    "'%p:%o %k=%s\\n'). Without --follow it stops at the end "
                    "of each partition; with --follow it waits for new messages until "
                    "Ctrl-C. Starts at the earliest offset, or at the end with --follow, "
                    "unless --offset, --from-beginning or --from-timestamp says otherwise. "
                    "With --group it joins that consumer group, reads the partitions the "
                    "group assigns from their committed offsets, commits after printing "
                    "and leaves the group on exit. With --follow a topic that does not "
                    "exist yet is waited for (never created) and read from its start once "
                    "it appears.")
    p.add_argument("topic", type=_name, help="topic to read")
    p.add_argument("--partition", type=_count(0), help="read only this partition "
                                                       "(default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--offset", type=_offset,
                       help="where to start: earliest, latest or an offset (needs "
                            "--partition)")
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the earliest retained offset")
    start.add_argument("--from-timestamp", metavar="TIME",
                       help="start at the first message at or after TIME: milliseconds "
                            "since the epoch, or ISO-8601 such as 2024-05-01T12:00:00Z "
                            "(local time without a zone)")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep waiting for new messages (Ctrl-C to stop)")
    p.add_argument("-n", "--max-messages", type=_count(1), metavar="N",
                   help="stop after N messages")
    p.add_argument("--group", type=_name, help="consume as a member of this consumer group")
    p.add_argument("--consumer-id", type=_name,
                   help="member id in the group (default skerry-cli-<host>-<pid>)")
    p.add_argument("--session-timeout-ms", type=_count(100), default=10_000,
                   help="the member's session timeout (default 10000); heartbeats go every "
                        "third of it")
    p.add_argument("--format", type=_output_format, default="plain", metavar="FORMAT",
                   help="plain: the values (default); json: one JSON object per message; "
                        "or a format string like kcat's -f (nothing is added: end it with "
                        "\\n): %%t topic, %%p partition, %%o offset, %%k key, %%K key "
                        "length, %%s value, %%S value length, %%T the producer's timestamp "
                        "(ms), %%A the broker's append time (ms), %%h headers "
                        "(name=value,...), %%%% a %%; \\n \\t \\r \\\\ escapes")
    p.add_argument("--print-key", action="store_true",
                   help="plain format: print each message's key and a tab before its value")
    p.add_argument("--print-timestamp", action="store_true",
                   help="plain format: print each message's timestamp (milliseconds since "
                        "the epoch, the producer's own; the broker's append time only for "
                        "a message sent without one) and a tab first")
    p.add_argument("--print-headers", action="store_true",
                   help="plain format: print each message's headers (name:value,... or "
                        "NO_HEADERS, as kafka-console-consumer) and a tab before the key")
    p.add_argument("--wait-ms", type=_count(1), default=1000,
                   help="long-poll time of each read while following (default 1000)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    p.set_defaults(func=_lazy("consume_command"))


# ------------------------------------------------------------------------------ topics, groups

def _add_admin(sub: Any, common: argparse.ArgumentParser) -> None:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parents = [common, output]

    topics = sub.add_parser("topics", help="list, create, describe, alter and delete topics")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION")
    tsub.required = True
    tlist = tsub.add_parser("list", parents=parents, help="every topic: partitions, "
                                                          "replication, messages, size")
    tlist.add_argument("--internal", action="store_true",
                       help="also list the Iggy transport's internal topics (__iggy.*)")
    describe = tsub.add_parser(
        "describe", parents=parents,
        help="per partition: role, hw, earliest and next offset, ISR, under-replicated, "
             "size, segments")
    describe.add_argument("topic", type=_name)
    create = tsub.add_parser("create", parents=parents, help="create a topic")
    create.add_argument("topic", type=_name)
    create.add_argument("--partitions", type=_count(1), default=3,
                        help="number of partitions (default 3)")
    create.add_argument("--replication-factor", type=_count(1), default=1,
                        help="replicas per partition (default 1)")
    create.add_argument("--min-isr", type=_count(1),
                        help="in-sync replicas an acks=all produce needs (default: the "
                             "broker's)")
    create.add_argument("--retention-ms", type=_count(1), help="delete segments older than "
                                                               "this")
    create.add_argument("--retention-bytes", type=_count(1),
                        help="keep each partition below this size")
    _compaction_options(create, alter=False)
    create.add_argument("--if-not-exists", action="store_true",
                        help="a topic that exists already is left as it is (exit 0)")
    alter = tsub.add_parser(
        "alter", parents=parents,
        help="add partitions to a topic or change its retention, cleanup policy or segments",
        description="Change an existing topic: --partitions grows it to a new total (keys "
                    "may then map to other partitions; partitions are never removed), "
                    "--retention-ms and --retention-bytes replace its retention (none: no "
                    "limit), applied by the broker's next retention pass (within a "
                    "minute); --cleanup-policy and the compaction and segment options "
                    "replace those settings. With etcd the change is the cluster's: every "
                    "broker applies it.")
    alter.add_argument("topic", type=_name)
    alter.add_argument("--partitions", type=_count(1), metavar="N",
                       help="the new total number of partitions (more than now)")
    alter.add_argument("--retention-ms", type=_limit, default=argparse.SUPPRESS,
                       metavar="MS|none", help="delete segments older than this; none: "
                                               "keep them whatever their age")
    alter.add_argument("--retention-bytes", type=_limit, default=argparse.SUPPRESS,
                       metavar="BYTES|none", help="keep each partition below this size; "
                                                  "none: whatever its size")
    _compaction_options(alter, alter=True)
    delete = tsub.add_parser("delete", parents=parents,
                             help="delete a topic and all its messages")
    delete.add_argument("topic", type=_name)
    topics.set_defaults(func=_lazy("topics_command"))

    groups = sub.add_parser("groups", help="list, describe and delete consumer groups, "
                                             "reset offsets")
    gsub = groups.add_subparsers(dest="groups_command", metavar="ACTION")
    gsub.required = True
    glist = gsub.add_parser("list", parents=parents,
                            help="every group and topic: state, generation, members, total lag")
    glist.add_argument("--internal", action="store_true",
                       help="also list the Iggy transport's consumer groups (iggy.consumer.*)")
    gdescribe = gsub.add_parser(
        "describe", parents=parents,
        help="members, assignment, committed offset, hw and lag per partition, for every "
             "topic the group consumes")
    gdescribe.add_argument("group", type=_name)
    gdescribe.add_argument("--topic", type=_name, help="only this topic")
    gdelete = gsub.add_parser(
        "delete", parents=parents,
        help="delete a consumer group and its committed offsets",
        description="Delete a consumer group on every topic it consumes (or on --topic "
                    "only): its generation, assignor and committed offsets are forgotten; "
                    "a consumer joining later starts a new group. The broker refuses while "
                    "the group has live members.")
    gdelete.add_argument("group", type=_name)
    gdelete.add_argument("--topic", type=_name, help="only on this topic")
    reset = gsub.add_parser(
        "reset-offsets", parents=parents,
        help="move a group's committed offsets (a dry run unless --execute)",
        description="Show, and with --execute apply, new committed offsets for a group on "
                    "one topic. Offsets outside the retained range are moved into it, and "
                    "the output says so. The broker refuses while the group has live "
                    "members. A group that has no offsets on the topic yet is refused "
                    "unless --create (a mistyped name would otherwise start a new group).")
    reset.add_argument("group", type=_name)
    reset.add_argument("--topic", type=_name, required=True)
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the earliest retained offset")
    to.add_argument("--to-latest", action="store_true", help="hw + 1: skip everything there")
    to.add_argument("--to-offset", type=_count(0), metavar="N",
                    help="offset N, clamped between earliest and latest")
    to.add_argument("--to-datetime", metavar="TIME",
                    help="the first message at or after TIME (ISO-8601 such as "
                         "2024-05-01T12:00:00Z, local time without a zone, or milliseconds "
                         "since the epoch); latest when there is none")
    to.add_argument("--shift-by", type=_signed, metavar="N",
                    help="the committed offset plus N (negative: back), clamped between "
                         "earliest and latest")
    reset.add_argument("--partition", type=_count(0), help="only this partition")
    reset.add_argument("--execute", action="store_true", help="apply the plan")
    reset.add_argument("--create", action="store_true",
                       help="with --execute: start the group on the topic if it has no "
                            "offsets there yet")
    groups.set_defaults(func=_lazy("groups_command"))


def _add_cluster(sub: Any, common: argparse.ArgumentParser) -> None:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cluster = sub.add_parser("cluster", help="a cluster's brokers, controller, leaders and "
                                             "ISR; force a leader")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")
    csub.required = True
    csub.add_parser(
        "status", parents=[common, output],
        help="brokers (up or down), controller, and per partition the leader, epoch, "
             "replicas, ISR and whether it is under-replicated",
        description="Ask the --bootstrap broker for the address book and topics, every "
                    "broker whether it is up, and each partition's leader for its replicas "
                    "and ISR. Exit status 0 when every partition is fully replicated, 1 "
                    "when some are under-replicated or without a leader.")
    elect = csub.add_parser(
        "elect", parents=[common],
        help="force a broker to lead a partition (ADMIN_SET_PARTITION_LEADER)",
        description="Make --broker (default: the first replica in list order that is up "
                    "and in the ISR) lead the partition in a new leader epoch. A broker "
                    "outside the ISR is refused unless unclean election is on, since it may "
                    "lack committed messages.")
    elect.add_argument("topic", type=_name)
    elect.add_argument("partition", type=_count(0))
    elect.add_argument("--broker", type=_count(0), help="the broker id to lead")
    cluster.set_defaults(func=_lazy("cluster_command"))


def _add_acls(sub: Any, common: argparse.ArgumentParser) -> None:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    acls = sub.add_parser("acls", help="add, remove and list ACLs: who may do what "
                                       "(docs/security.md)")
    asub = acls.add_subparsers(dest="acls_command", metavar="ACTION")
    asub.required = True
    for action, text in (("add", "allow (or with --deny, deny) operations on a resource"),
                         ("remove", "remove every ACL matching the options given"),
                         ("list", "the ACLs matching the options given (all without any)")):
        p = asub.add_parser(action, parents=[common, output], help=text)
        needed = action == "add"
        p.add_argument("--principal", required=needed, metavar="User:NAME",
                       help="the user (User:alice, or alice; User:* for everyone)")
        where = p.add_mutually_exclusive_group(required=needed)
        where.add_argument("--topic", metavar="NAME", help="a topic (* for every topic)")
        where.add_argument("--group", metavar="NAME", help="a consumer group (* for every "
                                                            "group)")
        where.add_argument("--cluster", action="store_true", help="the cluster")
        p.add_argument("--prefixed", action="store_true",
                       help="NAME is a prefix: every topic or group whose name starts with it")
        p.add_argument("--operation", action="append", default=[], metavar="OP",
                       help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                            "DescribeConfigs, AlterConfigs, IdempotentWrite or All "
                            "(repeat for several)" + ("; at least one" if needed else ""))
        p.add_argument("--deny", action="store_true",
                       help="a DENY rule (wins over any allow)" if needed
                       else "only DENY rules")
        if not needed:
            p.add_argument("--allow", action="store_true", help="only ALLOW rules")
    acls.set_defaults(func=_lazy("acls_command"))


def add_tool_parsers(sub: Any) -> None:
    """Add ``produce``, ``consume``, ``topics``, ``groups`` and ``cluster`` to the
    ``skerry`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap", default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help="the broker (default $SKERRY_BOOTSTRAP, else 127.0.0.1:9092)")
    common.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="longest wait for any one answer (default 10)")
    common.add_argument("--user", default=os.environ.get(USER_ENV) or None,
                        help=f"authenticate (AUTH) as USER (default ${USER_ENV}); the token "
                             f"is read from ${TOKEN_ENV}")
    common.add_argument("--tls", action="store_true",
                        default=os.environ.get("SKERRY_TLS", "") in ("1", "true", "yes"),
                        help="connect with TLS, verifying the broker's certificate against "
                             "the system's CAs (default $SKERRY_TLS)")
    common.add_argument("--cafile", default=os.environ.get("SKERRY_CAFILE") or None,
                        metavar="PEM", help="verify the broker's certificate against these CA "
                                            "certificates instead (implies --tls; default "
                                            "$SKERRY_CAFILE)")
    _add_produce(sub, common)
    _add_consume(sub, common)
    _add_admin(sub, common)
    _add_cluster(sub, common)
    _add_acls(sub, common)
