"""The ``skerry`` command line: ``skerry serve`` and the operator tools.

Owns: argument parsing, turning configuration mistakes into one clear line and exit code 2,
and dispatching to the subcommands. Must not contain broker logic.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skerry", description="Skerry message broker and its tools.")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
