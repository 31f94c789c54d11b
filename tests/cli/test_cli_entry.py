"""``skerry serve`` goes through the shell's entry point: the CLI package parses and loads
the configuration, the shell (``broker.__main__``) hands it the function that serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.cli import main as cli_main


class ServeEntryTests:
    def test_the_cli_serves_with_what_the_shell_hands_it(self, tmp_path: Path) -> None:
        """The loaded configuration (command-line overrides applied) reaches ``serve``, and
        its exit code is the command's."""
        seen: list[Any] = []

        def serve(config: Any) -> int:
            seen.append(config)
            return 7

        code = cli_main(["serve", "--port", "0", "--data-dir", str(tmp_path)], serve=serve)
        assert code == 7
        assert [(c.values["port"], c.values["data_dir"]) for c in seen] == [(0, str(tmp_path))]

    def test_without_the_shell_serve_is_refused_clearly(self, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
        """Called without ``serve`` (a stale console script), the command says where serving
        runs from and exits 2 instead of failing with a traceback."""
        assert cli_main(["serve", "--port", "0", "--data-dir", str(tmp_path)]) == 2
        assert "python -m broker serve" in capsys.readouterr().err
