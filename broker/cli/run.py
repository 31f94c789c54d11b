"""Running the ``skerry`` client commands once ``broker.cli.parsers`` parsed their flags.

Owns: turning flags into the option objects of ``broker.cli.produce``,
``broker.cli.consume`` and ``broker.cli.admin``, the way in (``--bootstrap``, ``AUTH``
with ``$SKERRY_USER``/``$SKERRY_TOKEN``, TLS with ``--tls``/``--cafile``), running each
command on its own asyncio loop (SIGTERM cancels like Ctrl-C), where output goes (data on
stdout, progress and summaries on stderr) and the exit codes: 0 done, 1 the broker refused
something or could not be reached, 2 a usage mistake, 130 interrupted.

Kept apart from ``broker.cli.parsers`` so that building the ``skerry`` parser (``skerry serve``
included) does not import asyncio and the clients.

Must not import: Twisted or the broker's server side (core, handlers, store, groups,
replication): these are clients, usable against any V1 broker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from broker.cli.parsers import TOKEN_ENV
from broker.cli.table import to_json
from broker.client.aio import Address, BrokerError, Connection, ToolError, parse_address

__all__ = ["consume_command", "groups_command", "produce_command", "topics_command"]

T = TypeVar("T")


def _run(coroutine: Callable[[], Awaitable[T]]) -> T:
    """Run on a fresh loop. Ctrl-C (SIGINT) and SIGTERM cancel the command, which then
    finishes what it must (a producer takes the answers to what it sent, a group member
    commits and leaves); a second one cancels that too. ``KeyboardInterrupt`` when the
    command ends cancelled."""

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(signum, task.cancel)
                except (NotImplementedError, RuntimeError, ValueError):
                    continue  # not the main thread (tests calling main() in-process)
        return await coroutine()

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def _address(args: argparse.Namespace) -> Address:
    """``--bootstrap`` plus the way in: ``AUTH`` as ``--user`` with ``$SKERRY_TOKEN`` (never
    a flag: command lines show up in ``ps``), TLS with ``--tls``/``--cafile``."""
    address = parse_address(args.bootstrap)
    token = os.environ.get(TOKEN_ENV)
    if args.user is not None and not token:
        raise ToolError(f"--user {args.user} needs its token in ${TOKEN_ENV}", 2)
    context = None
    if args.tls or args.cafile:
        try:
            context = ssl.create_default_context(cafile=args.cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ToolError(f"cannot use --cafile {args.cafile}: {exc}", 2) from None
    return replace(address, user=args.user, token=token if args.user else None, tls=context)


def _fail(command: str, exc: ToolError, args: argparse.Namespace | None = None) -> int:
    """Print ``exc`` as the command's one error line (a broker's refusal in words, see
    ``broker.cli.explain``); its exit code."""
    message = exc.message
    if isinstance(exc, BrokerError):
        from broker.cli.explain import explain

        message = explain(exc, getattr(args, "topic", None))
    print(f"skerry {command}: {message}", file=sys.stderr, flush=True)
    return exc.exit_code


def _quiet_stdout() -> None:
    """After the reader of stdout went away (``| head``): no error at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def produce_command(args: argparse.Namespace) -> int:
    """``skerry produce``: stdin to a topic; exit 1 if any line failed."""
    from broker.cli.produce import ProduceOptions, produce
    from broker.client.codec import is_plain_key

    key = None
    if args.key is not None:
        key = args.key.encode()
        if not is_plain_key(key):
            print("skerry produce: --key must not contain whitespace, ',', '|' or ':' "
                  "(at most 255 bytes)", file=sys.stderr)
            return 2
    try:
        options = ProduceOptions(
            address=_address(args), topic=args.topic, key=key, acks=args.acks,
            partition=args.partition, window=args.window,
            progress=False if args.no_progress else None, quiet=args.quiet,
            timeout=args.timeout)
        summary = _run(lambda: produce(options, sys.stdin.buffer, sys.stderr))
    except ToolError as exc:
        return _fail("produce", exc, args)
    except KeyboardInterrupt:
        return 130
    if not args.quiet or summary.errors or summary.stopped:
        print(summary.line(args.topic), file=sys.stderr, flush=True)
    if summary.interrupted:
        return 130
    return 1 if summary.errors or summary.stopped else 0


def consume_command(args: argparse.Namespace) -> int:
    """``skerry consume``: a topic's messages to stdout."""
    from broker.cli.consume import ConsumeOptions, consume, parse_timestamp

    problems = []
    if args.group is not None and (args.offset is not None or args.from_beginning
                                   or args.from_timestamp is not None):
        problems.append("--group reads from the group's committed offsets; move them with "
                        "`skerry groups reset-offsets` instead of --offset/--from-*")
    if args.group is not None and args.partition is not None:
        problems.append("--group reads the partitions the group assigns; drop --partition")
    if args.offset is not None and args.offset.isdigit() and args.partition is None:
        problems.append("a numeric --offset needs --partition")
    if args.consumer_id is not None and args.group is None:
        problems.append("--consumer-id needs --group")
    if args.format != "plain" and (args.print_key or args.print_timestamp
                                   or args.print_headers):
        problems.append("--print-key, --print-timestamp and --print-headers are for the "
                        "plain format; --format json always has the key, the timestamps "
                        "and the headers, and a format string says what to print (%k, %T, "
                        "%h)")
    if args.format not in ("plain", "json"):
        from broker.cli.consume import compile_format

        try:
            compile_format(args.format)
        except ToolError as exc:
            problems.append(exc.message)
    if problems:
        for problem in problems:
            print(f"skerry consume: {problem}", file=sys.stderr)
        return 2
    try:
        options = ConsumeOptions(
            address=_address(args), topic=args.topic, partition=args.partition,
            offset="earliest" if args.from_beginning else args.offset,
            from_timestamp_ms=None if args.from_timestamp is None
            else parse_timestamp(args.from_timestamp),
            follow=args.follow, max_messages=args.max_messages, group=args.group,
            consumer_id=args.consumer_id, session_timeout_ms=args.session_timeout_ms,
            output_format=args.format, print_key=args.print_key,
            print_timestamp=args.print_timestamp, print_headers=args.print_headers,
            wait_ms=args.wait_ms, timeout=args.timeout)
        summary = _run(lambda: consume(options, sys.stdout.buffer, sys.stderr))
    except ToolError as exc:
        return _fail("consume", exc, args)
    except KeyboardInterrupt:
        return 130
    if summary.output_closed:
        _quiet_stdout()
    if not args.quiet:
        print(summary.line(options), file=sys.stderr, flush=True)
    return 0


def _admin(command: str, args: argparse.Namespace,
           action: Callable[[Connection], Awaitable[Any]],
           render: Callable[[Any], str]) -> int:
    async def run() -> Any:
        conn = await Connection.open(_address(args), args.timeout)
        try:
            return await action(conn)
        finally:
            await conn.close()

    try:
        result = _run(run)
    except ToolError as exc:
        return _fail(command, exc, args)
    except KeyboardInterrupt:
        return 130
    try:
        sys.stdout.write(to_json(result) if args.json else render(result))
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    return 0


def _compaction_args(args: argparse.Namespace) -> dict[str, Any]:
    """The compaction and segment options given (``parsers.COMPACTION_OPTIONS``)."""
    from broker.cli.parsers import COMPACTION_OPTIONS

    return {key: getattr(args, key) for key in COMPACTION_OPTIONS if hasattr(args, key)}


def topics_command(args: argparse.Namespace) -> int:
    """``skerry topics list|describe|create|alter|delete``."""
    from broker.cli import admin

    command = f"topics {args.topics_command}"
    if args.topics_command == "list":
        return _admin(command, args, lambda c: admin.list_topics(c, args.internal),
                      admin.render_topic_list)
    if args.topics_command == "describe":
        return _admin(command, args, lambda c: admin.describe_topic(c, args.topic),
                      admin.render_topic)
    if args.topics_command == "create":
        spec = admin.CreateTopic(args.topic, args.partitions, args.replication_factor,
                                 args.min_isr, args.retention_ms, args.retention_bytes,
                                 _compaction_args(args))
        return _admin(command, args,
                      lambda c: admin.create_topic(c, spec, args.if_not_exists),
                      admin.render_create)
    if args.topics_command == "alter":
        retention = {key: getattr(args, key) for key in ("retention_ms", "retention_bytes")
                     if hasattr(args, key)}
        settings = _compaction_args(args)
        if args.partitions is None and not retention and not settings:
            print("skerry topics alter: nothing to change; give --partitions, --retention-ms "
                  "or --retention-bytes", file=sys.stderr)
            return 2
        alter = admin.AlterTopic(args.topic, args.partitions, **retention, settings=settings)
        return _admin(command, args, lambda c: admin.alter_topic(c, alter), admin.render_alter)
    return _admin(command, args, lambda c: admin.delete_topic(c, args.topic),
                  lambda d: f"deleted topic {d['topic']}\n")


def groups_command(args: argparse.Namespace) -> int:
    """``skerry groups list|describe|delete|reset-offsets``."""
    from broker.cli import admin

    command = f"groups {args.groups_command}"
    if args.groups_command == "list":
        return _admin(command, args, lambda c: admin.list_groups(c, args.internal),
                      admin.render_group_list)
    if args.groups_command == "describe":
        return _admin(command, args, lambda c: admin.describe_groups(c, args.group, args.topic),
                      admin.render_groups)
    if args.groups_command == "delete":
        return _admin(command, args, lambda c: admin.delete_groups(c, args.group, args.topic),
                      admin.render_group_delete)
    from broker.cli.consume import parse_timestamp

    value: int | None = None
    if args.to_earliest or args.to_latest:
        target = "earliest" if args.to_earliest else "latest"
    elif args.to_offset is not None:
        target, value = "offset", args.to_offset
    elif args.to_datetime is not None:
        target = "datetime"
        try:
            value = parse_timestamp(args.to_datetime, "--to-datetime")
        except ToolError as exc:
            return _fail(command, exc)
    else:
        target, value = "shift", args.shift_by
    spec = admin.ResetOffsets(args.group, args.topic, target, value, args.partition,
                              args.execute, args.create, args.to_datetime or "")
    return _admin(command, args, lambda c: admin.reset_offsets(c, spec), admin.render_reset)


def acls_command(args: argparse.Namespace) -> int:
    """``skerry acls add|remove|list``."""
    from broker.cli import acls

    command = f"acls {args.acls_command}"
    if args.acls_command == "add" and not args.operation:
        return _fail(command, ToolError("name at least one --operation"))
    resource_type, name = (("Topic", args.topic) if args.topic is not None else
                           ("Group", args.group) if args.group is not None else
                           ("Cluster", "kafka-cluster") if args.cluster else (None, None))
    pattern = "prefixed" if args.prefixed else ("literal" if args.acls_command == "add"
                                                 or name is not None else None)
    permission = "deny" if args.deny else (
        "allow" if args.acls_command == "add" or getattr(args, "allow", False) else None)
    spec = acls.AclSpec(args.principal, resource_type, name, pattern, tuple(args.operation),
                        permission)
    if args.acls_command == "add":
        return _admin(command, args, lambda c: acls.add_acls(c, spec), acls.render_change)
    if args.acls_command == "remove":
        if spec == acls.AclSpec():
            return _fail(command, ToolError("name what to remove (--principal, --topic, "
                                            "--group, --cluster, --operation...)"))
        return _admin(command, args, lambda c: acls.remove_acls(c, spec), acls.render_change)
    return _admin(command, args, lambda c: acls.list_acls(c, spec), acls.render_acls)


def cluster_command(args: argparse.Namespace) -> int:
    """``skerry cluster status|elect``."""
    from broker.cli.cluster import elect, gather, render

    try:
        address = _address(args)
        if args.cluster_command == "status":
            report = _run(lambda: gather(address, args.timeout))
            if args.json:
                print(to_json(report.to_json()))
            else:
                sys.stdout.write(render(report))
            return 1 if any(r.under_replicated for r in report.partitions) else 0
        line = _run(lambda: elect(address, args.timeout, args.topic, args.partition,
                                  args.broker))
        print(line)
        return 0
    except ToolError as exc:
        return _fail(f"cluster {args.cluster_command}", exc, args)
    except KeyboardInterrupt:
        return 130
