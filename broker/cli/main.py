"""The ``skerry`` command line: ``skerry serve``, ``skerry harness`` and the operator tools.

Owns: argument parsing, turning configuration mistakes into one clear line and exit code 2,
and dispatching to the subcommands. Must not contain broker logic.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from broker.cli.parsers import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP
from broker.config import ConfigError, load_config, reference_markdown

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    overrides = {
        "host": args.host,
        "port": args.port,
        "data_dir": args.data_dir,
        "log_level": args.log_level,
    }
    try:
        config = load_config(args.config, overrides)
    except ConfigError as exc:
        print(f"skerry: configuration error: {exc}", file=sys.stderr)
        return 2
    from broker.server import run

    return run(config)


def _config_reference(args: argparse.Namespace) -> int:
    sys.stdout.write(reference_markdown())
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    try:
        from data.pipelines import order_stats
    except ImportError as exc:  # pragma: no cover - depends on the install
        print(f"skerry: the pipeline needs the spark extra (pip install -e '.[spark]'): {exc}",
              file=sys.stderr)
        return 2
    if args.action == "seed":
        import time

        seeded = order_stats.seed(args.bootstrap, args.topic, args.count)
        span = " to ".join(time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ms / 1000))
                           for ms in (seeded.first_ms, seeded.last_ms))
        where = ", after the newest order already there" if seeded.continued else ""
        print(f"produced {seeded.count} orders to {args.topic}; event times {span}{where}")
        return 0
    from broker.client.codec import ClientError

    try:  # the broker is asked first, so an unreachable one is one line, not a Spark trace
        ends = order_stats.sink_ends(args.bootstrap, args.sink_topic)
    except ClientError as exc:
        print(f"skerry pipeline: {exc}", file=sys.stderr)
        return 1
    # Returns when both queries are done (continuous: when one stops; a failure raises).
    try:
        order_stats.run(args.bootstrap, args.topic, args.sink_topic, args.output,
                        args.checkpoint, args.watermark, once=not args.continuous)
    except order_stats.MalformedOrder as exc:
        print(f"skerry pipeline: {exc}; stopped (the pipeline reads orders as `skerry "
              f"pipeline seed` writes them)", file=sys.stderr)
        return 1
    written = order_stats.windows_written(args.bootstrap, args.sink_topic, ends)
    print(f"order-stats: {order_stats.describe_windows(written)}")
    print(f"order-stats: results in topic {args.sink_topic} and {args.output}")
    return 0


def _harness(args: argparse.Namespace) -> int:
    import secrets

    from broker.harness.runner import HarnessOptions, run

    host, _, port = args.bootstrap.rpartition(":")
    problems = []
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        problems.append(f"--bootstrap must be host:port, not {args.bootstrap!r}")
    if args.consumers < 1:
        problems.append("--consumers must be at least 1")
    if args.duration <= 0:
        problems.append("--duration must be positive")
    if not 100 <= args.session_timeout_ms <= 3_600_000:
        problems.append("--session-timeout-ms must be between 100 and 3600000")
    if args.partitions < 1:
        problems.append("--partitions must be at least 1")
    if args.produce_rate < 0:
        problems.append("--produce-rate must not be negative")
    assignors = {"classic": ("round_robin", "range", "sticky"), "consumer": ("uniform", "range")}
    assignor = args.assignor or assignors[args.protocol][0]
    if assignor not in assignors[args.protocol]:
        problems.append(f"--assignor {assignor} is not one of "
                        f"{', '.join(assignors[args.protocol])} (--protocol {args.protocol})")
    if problems:
        for problem in problems:
            print(f"skerry harness: {problem}", file=sys.stderr)
        return 2
    token = secrets.token_hex(3)
    options = HarnessOptions(
        host=host.strip("[]"), port=int(port), consumers=args.consumers,
        duration_s=args.duration,
        seed=args.seed if args.seed is not None else secrets.randbelow(1_000_000),
        assignor=assignor, session_timeout_ms=args.session_timeout_ms,
        protocol=args.protocol,
        topic=args.topic or f"harness-{token}", group=args.group or f"harness-{token}",
        partitions=args.partitions, produce_rate=args.produce_rate,
        request_timeout_s=args.request_timeout, chart=args.chart, json_output=args.json)
    return run(options)


def _auth(args: argparse.Namespace) -> int:
    from broker.auth import AuthFileError, add_user, list_users, remove_user

    try:
        if args.auth_command == "add":
            token = add_user(args.tokens_file, args.user)
            print(token)
            print(f"added {args.user} to {args.tokens_file}; the token above is shown only "
                  "once (the file keeps its SHA-256); a running broker reads the file when "
                  "it starts", file=sys.stderr)
        elif args.auth_command == "remove":
            remove_user(args.tokens_file, args.user)
            print(f"removed {args.user} from {args.tokens_file}; a running broker reads the "
                  "file when it starts")
        else:
            for user in list_users(args.tokens_file):
                print(user)
    except AuthFileError as exc:
        print(f"skerry auth {args.auth_command}: {exc}", file=sys.stderr)
        return 2
    return 0


def _dev_cluster(args: argparse.Namespace) -> int:
    import signal
    from pathlib import Path

    from broker.cli.devcluster import DevClusterOptions, run_dev_cluster

    if args.brokers < 1 or args.partitions < 1:
        print("skerry dev-cluster: --brokers and --partitions must be at least 1",
              file=sys.stderr)
        return 2
    stop: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda number, _frame: stop.append(number))
    options = DevClusterOptions(brokers=args.brokers, directory=Path(args.dir),
                                topic=args.topic, partitions=args.partitions,
                                etcd=not args.no_etcd)
    return run_dev_cluster(options, sys.stdout, lambda: bool(stop))


def build_parser() -> argparse.ArgumentParser:
    from broker.version import skerry_version

    parser = argparse.ArgumentParser(
        prog="skerry", description="Skerry message broker and its tools.")
    parser.add_argument("--version", action="version", version=f"skerry {skerry_version()}",
                        help="print the version (skerry X.Y.Z) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    serve = sub.add_parser("serve", help="run the broker (127.0.0.1:9092, data in ./skerry-data)")
    serve.add_argument("--config", metavar="FILE", help="YAML configuration file")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="V1 port (default 9092; 0 picks a free port)")
    serve.add_argument("--data-dir", dest="data_dir", help="data directory (default ./skerry-data)")
    serve.add_argument("--log-level", dest="log_level",
                       choices=("debug", "info", "warning", "error"), help="log verbosity")
    serve.set_defaults(func=_serve)

    ref = sub.add_parser("config-reference", help="print the configuration reference (Markdown)")
    ref.set_defaults(func=_config_reference)

    harness = sub.add_parser(
        "harness", help="simulated consumers with chaos against a running broker; checks "
                        "the consumer-group invariants (exit 0: no violations)")
    harness.add_argument("--bootstrap", default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                         metavar="HOST:PORT",
                         help="the broker to test (default $SKERRY_BOOTSTRAP, else "
                              "127.0.0.1:9092); the only address the harness connects to")
    harness.add_argument("-n", "--consumers", type=int, default=5,
                         help="simulated consumers at the start (default 5)")
    harness.add_argument("--duration", type=float, default=30.0, metavar="SECONDS",
                         help="length of the chaos window (default 30); the run adds a "
                              "settle time of max(2 s, 3 session timeouts)")
    harness.add_argument("--seed", type=int, help="seed of the chaos schedule (default: "
                                                  "random, printed in the report)")
    harness.add_argument("--protocol", default="classic", choices=("classic", "consumer"),
                         help="classic: JOIN/SYNC/HEARTBEAT members (default); consumer: "
                              "KIP-848 members driven by GROUP_HEARTBEAT (the session "
                              "timeout is then the broker's "
                              "groups.consumer_session_timeout_ms: pass the same value as "
                              "--session-timeout-ms)")
    harness.add_argument("--assignor",
                         choices=("round_robin", "range", "sticky", "uniform"),
                         help="assignor the members ask for (default round_robin; with "
                              "--protocol consumer: uniform or range, default uniform)")
    harness.add_argument("--session-timeout-ms", dest="session_timeout_ms", type=int,
                         default=1000, help="the members' session timeout (default 1000)")
    harness.add_argument("--topic", help="topic to consume (default: a new harness-<random>)")
    harness.add_argument("--group", help="consumer group (default: a new harness-<random>); "
                                         "must have no live members")
    harness.add_argument("--partitions", type=int, default=12,
                         help="partitions of the topic when the harness creates it "
                              "(default 12)")
    harness.add_argument("--produce-rate", dest="produce_rate", type=float, default=200.0,
                         metavar="MSGS_PER_S", help="messages produced per second "
                                                    "(default 200)")
    harness.add_argument("--request-timeout", dest="request_timeout", type=float,
                         default=5.0, metavar="SECONDS",
                         help="longest wait for any one answer (default 5)")
    harness.add_argument("--chart", metavar="FILE.png",
                         help="also draw a timeline of members, generations and "
                              "ownership (needs matplotlib: pip install 'skerry[harness]')")
    harness.add_argument("--json", action="store_true",
                         help="print the report as JSON instead of text")
    harness.set_defaults(func=_harness)

    pipeline = sub.add_parser(
        "pipeline", help="run the example Spark pipeline (needs the spark extra; docs/spark.md)")
    pipeline.add_argument("action", choices=["seed", "order-stats"],
                          help="seed: produce sample orders; order-stats: run the pipeline")
    pipeline.add_argument("--bootstrap", default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                          help="broker host:port (default $SKERRY_BOOTSTRAP, else 127.0.0.1:9092)")
    pipeline.add_argument("--topic", default="pipeline-orders", help="source topic")
    pipeline.add_argument("--count", type=int, default=1000, help="seed: how many orders")
    pipeline.add_argument("--sink-topic", default="pipeline-order-stats",
                          help="topic for the results")
    pipeline.add_argument("--output", default="./skerry-pipeline/order-stats.parquet",
                          help="Parquet folder")
    pipeline.add_argument("--checkpoint", default="./skerry-pipeline/order-stats.checkpoint",
                          help="checkpoint folder (keep it to resume exactly once)")
    pipeline.add_argument("--watermark", default="1 minute", help="event-time watermark delay")
    pipeline.add_argument("--continuous", action="store_true",
                          help="keep running (default: process what is there, then stop)")
    pipeline.set_defaults(func=_pipeline)

    dev = sub.add_parser(
        "dev-cluster", help="a local cluster for trying things out: etcd (when installed) and "
                            "N brokers on loopback ports, stopped together by Ctrl-C",
        description="Start a local etcd when the etcd binary is installed (else the brokers "
                    "run in the operator-driven mode, said in one line) and --brokers "
                    "brokers on free 127.0.0.1 ports, with configuration, data and logs "
                    "under --dir. Prints how to reach them; Ctrl-C or SIGTERM stops them "
                    "all.")
    dev.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    dev.add_argument("--dir", default="skerry-dev-cluster",
                     help="folder for everything (default ./skerry-dev-cluster)")
    dev.add_argument("--topic", default="demo",
                     help="without etcd: the topic every broker declares (default demo)")
    dev.add_argument("--partitions", type=int, default=3,
                     help="partitions of that topic, or of auto-created topics with etcd "
                          "(default 3)")
    dev.add_argument("--no-etcd", action="store_true",
                     help="the operator-driven mode even when etcd is installed")
    dev.set_defaults(func=_dev_cluster)

    auth = sub.add_parser(
        "auth", help="add, remove and list the users of a tokens file (auth.tokens_file)",
        description="Manage the file that auth.tokens_file names: one <user>:<sha256 of "
                    "the token> line per user. The token itself is printed once by add and "
                    "kept nowhere. A running broker reads the file when it starts.")
    asub = auth.add_subparsers(dest="auth_command", metavar="ACTION")
    asub.required = True
    add = asub.add_parser("add", help="add a user with a new random token; prints the token "
                                      "once (on stdout)")
    add.add_argument("user", help="the user name (1-249 of A-Z a-z 0-9 . _ -)")
    add.add_argument("tokens_file", help="the file (created with mode 0600 if missing)")
    remove = asub.add_parser("remove", help="remove a user (its token stops working)")
    remove.add_argument("user")
    remove.add_argument("tokens_file")
    alist = asub.add_parser("list", help="the users of the file, one per line")
    alist.add_argument("tokens_file")
    auth.set_defaults(func=_auth)

    from broker.cli.parsers import add_tool_parsers  # produce, consume, topics, groups

    add_tool_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
