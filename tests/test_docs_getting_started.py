"""docs/getting-started.md, followed command by command as a newcomer would: every ``$``
command of its ``console`` blocks runs and its output must be what the page shows. The
README's ``console`` blocks (its first ``nc`` session and the same through a pipe) are
replayed the same way on a broker of their own. Each page's broker keeps its data where
the page's ``skerry serve`` command says (``--data-dir``, else ``./skerry-data``), inside
a folder standing for the reader's clone; ``tests/test_docs_in_order.py`` runs the pages
one after the other in one such folder.

How the page's commands are run:

- the install-and-serve command (the README's first command, with ``--data-dir``) starts
  a ``BrokerProcess`` on a free port instead (the venv is the one running this test), with
  the command's data directory; the log lines the page shows must appear in the broker's
  log;
- the install-and-test command (the README's second command) is only checked to be the
  README's, since it is this very test suite;
- ``nc 127.0.0.1 9092`` is replayed over a socket: the block's lines alternate request and
  reply, and every reply must match exactly;
- ``printf '...' | nc -N 127.0.0.1 9092`` is replayed over a socket too: what the
  ``printf`` prints (run by bash) is sent, the sending side is shut down (what ``-N`` does
  at the end of its input), and everything the broker sends until it closes the connection
  must be the lines shown; with an OpenBSD ``nc`` installed, the command also runs as is
  (port changed) in ``test_readme_pipe_works_with_the_installed_nc``;
- any other command runs in bash from the repository root with ``.venv/bin/skerry``
  meaning ``python -m broker`` and ``SKERRY_BOOTSTRAP`` pointing at the broker; stdout and
  stderr together must be the lines shown.

Before comparing, what differs from machine to machine is blanked out on both sides: log
times, paths to the data directory, durations, rates, epoch-millisecond timestamps, the
open-file limit and the port.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT, BrokerProcess, debian_tool

DOC = ROOT / "docs" / "getting-started.md"
README = ROOT / "README.md"

_BLOCK_RE = re.compile(r"^```console\n(.*?)^```", re.S | re.M)
_PIPED_NC_RE = re.compile(r"^(printf '[^']*') \| nc -N 127\.0\.0\.1 9092$")
_VARIABLE = [
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"), "<time>"),
    # ./skerry-data, /home/you/skerry/getting-started-data, ...: where the clone is
    (re.compile(r"(?:[^\s;]*/)?[\w.-]+-data\b"), "<data>"),
    (re.compile(r"open-file limit \d+"), "open-file limit <n>"),
    (re.compile(r"\b\d+\.\d+ ?s\b"), "<seconds>"),
    (re.compile(r"\([0-9,.]+k? msgs/s\)"), "(<rate>)"),
    (re.compile(r"\b1\d{12}\b"), "<epoch-ms>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    # compiled or the pure-Python twin, by machine (docs/performance.md, "Compiled loops")
    (re.compile(r"per-message loops: .*"), "per-message loops: <implementation>"),
]


@dataclass(frozen=True)
class Step:
    command: str
    output: list[str]


def steps(markdown: str) -> list[Step]:
    """The ``$`` commands of every ``console`` block, each with the lines shown under it."""
    found: list[Step] = []
    for block in _BLOCK_RE.findall(markdown):
        current: Step | None = None
        for line in block.splitlines():
            if line.startswith("$ "):
                current = Step(line[2:], [])
                found.append(current)
            else:
                assert current is not None, f"output before any command: {line!r}"
                current.output.append(line)
    return found


def normalize(line: str) -> str:
    for pattern, replacement in _VARIABLE:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def serve_data_dir(command: str) -> str:
    """The data directory a page's ``skerry serve`` command uses, as the page writes it
    (relative to the folder it is run in): its ``--data-dir``, else the default."""
    assert "skerry serve" in command, command
    args = shlex.split(command.split("skerry serve", 1)[1])
    if "--data-dir" in args:
        return args[args.index("--data-dir") + 1]
    return "./skerry-data"


def start_page_broker(command: str, shown_log: list[str], folder: Path,
                      name: str) -> BrokerProcess:
    """The broker a page's ``skerry serve`` command starts, run in ``folder`` (the reader's
    clone) on a free port: its data directory is the command's, under ``folder``; every log
    line the page shows under the command must be in its log."""
    data_dir = folder / serve_data_dir(command)
    broker = BrokerProcess(folder / f".broker-{name}", {"data_dir": str(data_dir)}).start()
    try:
        log = {normalize(line) for line in broker.log_text().splitlines()}
        for shown in shown_log:
            assert normalize(shown) in log, (name, shown, sorted(log))
    except BaseException:
        broker.stop()
        raise
    return broker


def in_folder(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A page's YAML configuration as a reader runs it in ``folder`` (the clone): its
    ``data_dir`` (relative, or the default) under ``folder``."""
    data_dir = Path(config.get("data_dir", "./skerry-data"))
    assert not data_dir.is_absolute(), data_dir
    return {**config, "data_dir": str(folder / data_dir)}


def readme_serve_command() -> str:
    """The README's install-and-serve command (its quick start)."""
    (serve,) = [c for c in readme_commands() if "skerry serve" in c]
    return serve


def nc_session(markdown: str) -> list[str]:
    """The lines of a page's first ``nc 127.0.0.1 9092`` session."""
    return next(s.output for s in steps(markdown) if s.command == "nc 127.0.0.1 9092")


def readme_commands() -> list[str]:
    """Command lines inside the README's code blocks."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", README.read_text(), re.S | re.M)
    return [line for block in blocks for line in block.splitlines()]


def replay_nc(broker: BrokerProcess, lines: list[str]) -> None:
    assert len(lines) % 2 == 0, "an nc session alternates request and reply lines"
    client = broker.client()
    try:
        for request, reply in zip(lines[::2], lines[1::2], strict=True):
            assert client.request(request) == reply, request
    finally:
        client.close()


def replay_piped_nc(broker: BrokerProcess, command: str, lines: list[str]) -> None:
    match = _PIPED_NC_RE.fullmatch(command)
    assert match, f"not a printf piped into nc -N 127.0.0.1 9092: {command}"
    data = subprocess.run(["bash", "-c", match.group(1)], check=True,
                          stdout=subprocess.PIPE).stdout
    client = broker.client()
    try:
        client.send(data)
        client.shut_write()
        assert client.read_to_eof().decode().splitlines() == lines, command
    finally:
        client.close()


def run_step(step: Step, broker: BrokerProcess) -> None:
    """Run one ``$`` command of a page (not the install-and-serve one) against ``broker``
    and compare its output with the lines shown."""
    if "pytest" in step.command:
        assert not step.output
    elif step.command.startswith("nc "):
        assert step.command == "nc 127.0.0.1 9092"
        replay_nc(broker, step.output)
    elif _PIPED_NC_RE.fullmatch(step.command):
        replay_piped_nc(broker, step.command, step.output)
    else:
        got = [normalize(line) for line in run_shell(step.command, broker)]
        assert got == [normalize(line) for line in step.output], step.command


def run_shell(command: str, broker: BrokerProcess) -> list[str]:
    command = command.replace(".venv/bin/skerry", f"{shlex.quote(sys.executable)} -m broker")
    env = dict(os.environ, SKERRY_BOOTSTRAP=f"127.0.0.1:{broker.port}")
    result = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, timeout=120)
    assert result.returncode == 0, result.stdout.decode(errors="replace")
    return result.stdout.decode(errors="replace").splitlines()


def run_readme(folder: Path) -> None:
    """The README's sessions, on the broker its quick start starts in ``folder``."""
    readme = steps(README.read_text())
    assert [s.command for s in readme][:1] == ["nc 127.0.0.1 9092"]
    assert any(_PIPED_NC_RE.fullmatch(s.command) for s in readme)
    broker = start_page_broker(readme_serve_command(), [], folder, "readme")
    try:
        for step in readme:
            run_step(step, broker)
    finally:
        broker.stop()


def run_getting_started(folder: Path) -> None:
    """Every command of docs/getting-started.md, in order, in ``folder``."""
    page = steps(DOC.read_text())
    assert page, "no console blocks found"
    serve = page[0]
    assert "skerry serve" in serve.command, "the page starts by starting the broker"
    broker = start_page_broker(serve.command, serve.output, folder, "getting-started")
    try:
        for step in page[1:]:
            run_step(step, broker)
    finally:
        broker.stop()


class GettingStartedTests:
    def test_page_commands_give_the_output_shown(self, tmp_path: Path) -> None:
        """Following the page, each command prints what the page says it prints."""
        run_getting_started(tmp_path)

    def test_readme_sessions_give_the_output_shown(self, tmp_path: Path) -> None:
        """The README's nc session, then the same through a pipe (`printf ... | nc -N`,
        which half-closes: every reply, then EOF), give what the README shows on the
        broker its quick start starts."""
        run_readme(tmp_path)

    def test_the_two_first_sessions_are_one(self) -> None:
        """The README's first nc session and the page's are the same lines, so a reader who
        typed one sees the other agree."""
        assert nc_session(README.read_text()) == nc_session(DOC.read_text())

    def test_readme_pipe_works_with_the_installed_nc(self, tmp_path: Path) -> None:
        """The README's `printf ... | nc -N` command, run as is by a real OpenBSD nc (port
        changed), prints a reply per request and exits: the broker closes after answering."""
        nc = debian_tool("nc", "netcat-openbsd")
        usage = subprocess.run([nc, "-h"], capture_output=True, text=True, timeout=10).stderr
        if not re.search(r"^\s*-N\s", usage, re.M):
            pytest.skip("this nc has no -N option (it is not OpenBSD netcat)")
        piped = [s for s in steps(README.read_text()) if _PIPED_NC_RE.fullmatch(s.command)]
        assert piped
        offsets = re.compile(r"offset=\d+ hw=\d+")
        with BrokerProcess(tmp_path) as broker:
            for step in piped:
                command = step.command.replace(" 9092", f" {broker.port}")
                result = subprocess.run(["bash", "-c", command], capture_output=True,
                                        text=True, timeout=20)
                assert result.returncode == 0, result.stderr
                # A new broker: the offsets are those of an empty topic, not the README's.
                assert [offsets.sub("offset=<n> hw=<n>", line)
                        for line in result.stdout.splitlines()] == \
                    [offsets.sub("offset=<n> hw=<n>", line) for line in step.output]

    def test_install_and_test_commands_are_the_readmes(self) -> None:
        """The page's install-and-serve and install-and-test commands are the two README
        commands (the first with only a data directory of the page's own added), so the two
        never drift apart."""
        page = [s.command for s in steps(DOC.read_text())]
        readme = readme_commands()
        serve = [c for c in page if "skerry serve" in c]
        tests = [c for c in page if "pytest" in c]
        assert len(serve) == 1
        assert serve[0] == f"{readme_serve_command()} --data-dir {serve_data_dir(serve[0])}"
        assert serve_data_dir(serve[0]) != serve_data_dir(readme_serve_command())
        assert len(tests) == 1 and tests[0] in readme

    def test_links_point_at_existing_pages(self) -> None:
        """Every relative link of the page leads to a file of the repository."""
        links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", DOC.read_text())
        assert links
        for link in links:
            assert (DOC.parent / link).resolve().exists(), link

    def test_normalize_blanks_only_what_varies(self) -> None:
        """The comparison ignores times, paths, durations, rates, timestamps and the port,
        and nothing else."""
        shown = ("2026-05-01 12:00:00,002 INFO skerry.server: skerry listening on "
                 "v1=127.0.0.1:9092; data in /home/you/getting-started-data; open-file "
                 "limit 1024; started in 0.00s")
        real = ("2031-12-24 23:59:59,999 INFO skerry.server: skerry listening on "
                "v1=127.0.0.1:40123; data in /tmp/x/skerry-data; open-file limit 524288; "
                "started in 1.25s")
        assert normalize(shown) == normalize(real)
        assert normalize("produced 2 messages in 0.01 s (180 msgs/s); 0 errors") == \
            normalize("produced 2 messages in 1.50 s (1,234 msgs/s); 0 errors")
        assert normalize('{"timestamp": 1777636800123}') == normalize('{"timestamp": 1700000000000}')
        assert normalize("produced 2 messages") != normalize("produced 3 messages")
        assert normalize("partition=2 offset=0") != normalize("partition=1 offset=0")
