"""``python -m broker`` and the ``skerry`` console script: the shell's entry point.

Owns: handing the command line to ``broker.cli`` together with what ``skerry serve`` runs
(``broker.server.run``, imported only when a broker is started), so the CLI package never
imports the shell.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _serve(config: Any) -> int:
    from broker.server import run

    return run(config)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``skerry`` command (``broker.cli.main``), able to serve."""
    from broker.cli.main import main as cli_main

    return cli_main(argv, serve=_serve)


if __name__ == "__main__":
    sys.exit(main())
