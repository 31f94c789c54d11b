"""docs/operations.md, its ``console`` blocks followed command by command: the first,
``skerry serve --data-dir ./operations-data``, starts the broker the others run against
(on a free port, its data directory under the folder standing for the reader's clone, the
log line shown in its log), then every ``$`` command runs and prints exactly the lines
shown under it.

How the commands are run: in bash from the repository root, with the ``skerry`` command
meaning ``python -m broker`` of the interpreter running this test and ``SKERRY_BOOTSTRAP``
pointing at the broker; stdout and stderr together must be the lines shown. A command
whose shown output ends with one of the tool's error lines (``skerry <command>: ...``) must
exit with a non-zero status, every other one with 0. What differs from run to run (times,
durations, rates, epoch-millisecond timestamps, the port) is blanked out on both sides, as
for docs/getting-started.md.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, BrokerProcess
from tests.test_docs_getting_started import Step, normalize, start_page_broker, steps

DOC = ROOT / "docs" / "operations.md"
_SKERRY_RE = re.compile(r"(^|[|;&(]\s*)skerry(?= )")
_ERROR_RE = re.compile(r"^skerry [a-z -]+: ")


def as_shell(command: str) -> str:
    """``command`` with each ``skerry`` in command position run as ``python -m broker``."""
    return _SKERRY_RE.sub(lambda m: f"{m.group(1)}{shlex.quote(sys.executable)} -m broker",
                          command)


def run_step(step: Step, broker: BrokerProcess) -> None:
    """One ``$`` command of the page against ``broker``: the lines shown, and a failure
    exactly when the page shows the tool's error line last."""
    assert _SKERRY_RE.search(step.command), step.command
    env = dict(os.environ, SKERRY_BOOTSTRAP=f"127.0.0.1:{broker.port}")
    result = subprocess.run(["bash", "-c", as_shell(step.command)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120)
    text = result.stdout.decode(errors="replace")
    got = [normalize(line) for line in text.splitlines()]
    assert got == [normalize(line) for line in step.output], step.command
    fails = bool(step.output) and _ERROR_RE.match(step.output[-1]) is not None
    assert (result.returncode != 0) == fails, (step.command, text)


def run_operations(folder: Path) -> None:
    """The page's session, from its ``skerry serve`` on, in ``folder``."""
    page = steps(DOC.read_text())
    assert len(page) >= 10, "no console blocks found"
    serve = page[0]
    assert serve.command.startswith("skerry serve --data-dir "), serve.command
    broker = start_page_broker(serve.command, serve.output, folder, "operations")
    try:
        for step in page[1:]:
            run_step(step, broker)
    finally:
        broker.stop()


class OperationsPageTests:
    def test_console_blocks_give_the_output_shown(self, tmp_path: Path) -> None:
        """Each command of the page's console blocks prints what the page says, and fails
        exactly when the page shows it failing."""
        run_operations(tmp_path)

    def test_as_shell_replaces_only_the_command(self) -> None:
        """Only ``skerry`` in command position becomes the interpreter; words inside the
        arguments stay."""
        python = shlex.quote(sys.executable)
        assert as_shell("skerry topics list") == f"{python} -m broker topics list"
        assert as_shell("printf 'k:v' | skerry produce t") == \
            f"printf 'k:v' | {python} -m broker produce t"
        assert as_shell("(sleep 1; skerry x) & skerry y") == \
            f"(sleep 1; {python} -m broker x) & {python} -m broker y"
