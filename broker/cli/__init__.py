"""The ``skerry`` command: ``serve`` and the client commands (produce, consume, topics,
groups, harness, pipeline). ``main`` is the console-script entry point."""

from broker.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
