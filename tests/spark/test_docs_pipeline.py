"""docs/spark.md, "The example pipeline, step by step", followed command by command as a
newcomer would, in an empty working directory, against a real broker.

How the section's steps are run:

- step 1 (install) is not run again: the venv running this test is the one. Its command is
  checked to be the "Install" section's, and the ``spark`` extra it installs to exist;
- step 2 (``skerry serve``) starts a ``BrokerProcess`` on a free port instead; the defaults
  it relies on (the broker listens on 127.0.0.1:9092, where ``skerry pipeline`` looks for
  it) are checked;
- every other command is taken from the markdown text (the code spans that start with
  ``.venv/bin/``), not retyped here, and runs in bash in a temporary working directory (so
  ``skerry-pipeline/``, the one folder the pipeline writes, lands there), with ``.venv/bin/``
  meaning this venv's ``bin`` and the broker's address in ``SKERRY_BOOTSTRAP``, which every
  ``skerry`` command must honour (checked);
- step 6 runs its seed command and step 4's command again, at once, as a reader would:
  the new orders must close at least one more window and none of them may be late (the
  seed continues after the newest order already there), and the run must name the windows
  it wrote.

What is checked is what a user sees: the commands succeed, the Parquet folder holds exactly
the closed windows' counts and sums (computed here from the orders in the topic), the topic
``pipeline-order-stats`` holds the same windows, one message each, each run names the
windows it wrote, step 5 prints a table and five results, the second run adds only
windows that closed since, none twice, and
nothing is written in the working directory outside ``skerry-pipeline/``. The defaults keep
apart from the getting-started page: other topics, and a folder git ignores.

The pipeline runs in its own process with its own JVM, as in the doc (started with
``-XX:TieredStopAtLevel=1`` in ``JAVA_TOOL_OPTIONS``, for speed only).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")
pd = pytest.importorskip("pandas", reason="the spark extra is not installed")
pytest.importorskip("pyarrow", reason="the spark extra is not installed")

from broker.cli import build_parser  # noqa: E402
from broker.client.sync import Client  # noqa: E402
from broker.config import load_config  # noqa: E402
from data.spark.offsets import OffsetRange  # noqa: E402
from data.spark.source import SkerryOptions, read_range  # noqa: E402
from tests.support import ROOT, BrokerProcess  # noqa: E402

DOC = ROOT / "docs" / "spark.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
GITIGNORE = ROOT / ".gitignore"
PYPROJECT = ROOT / "pyproject.toml"
SOURCE, SINK = "pipeline-orders", "pipeline-order-stats"  # the pipeline's default topics
FOLDER = "skerry-pipeline"  # where it writes, in the working directory
SECTION = "## The example pipeline, step by step"
WINDOW_MS = 60_000
WATERMARK_MS = 60_000  # the pipeline's default --watermark, "1 minute"
_VENV_RE = re.compile(r"(?<![\w/.])\.venv/bin/(skerry|python)\b")
MINUTE_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")

Windows = dict[tuple[int, str], tuple[int, float]]
"""``{(window start ms, customer): (orders, total)}``"""


# ------------------------------------------------------------------------ the markdown


def section(markdown: str, heading: str) -> str:
    """The text under ``heading``, up to the next heading of the same level."""
    start = markdown.index(heading + "\n") + len(heading) + 1
    end = markdown.find("\n## ", start)
    return markdown[start:] if end < 0 else markdown[start:end]


def numbered_steps(text: str) -> dict[int, str]:
    """``{n: text}`` of the list items ``n. ...`` with their indented continuation lines."""
    found: dict[int, str] = {}
    current: int | None = None
    for line in text.splitlines():
        item = re.match(r"(\d+)\. (.*)", line)
        if item:
            current = int(item.group(1))
            found[current] = item.group(2)
        elif current is not None and line.startswith("   "):
            found[current] += " " + line.strip()
        else:
            current = None
    return found


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def commands(text: str) -> list[str]:
    """The commands a reader is told to run: code spans starting with ``.venv/bin/`` (or
    creating the venv)."""
    return [s for s in code_spans(text) if s.startswith((".venv/bin/", "python3 -m venv"))]


def page_steps() -> dict[int, str]:
    steps = numbered_steps(section(DOC.read_text(), SECTION))
    assert sorted(steps) == [1, 2, 3, 4, 5, 6], sorted(steps)
    return steps


def the_command(step: str, *, containing: str) -> str:
    found = [c for c in commands(step) if containing in c]
    assert len(found) == 1, (containing, step)
    return found[0]


# ------------------------------------------------------------------------ running commands


def skerry_argv(command: str) -> list[str] | None:
    """The arguments after ``.venv/bin/skerry`` of a documented command (None: not one)."""
    words = shlex.split(command)
    return words[1:] if words and words[0] == ".venv/bin/skerry" else None


def honours_bootstrap_env(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether ``skerry <argv>`` takes its broker from ``$SKERRY_BOOTSTRAP``."""
    monkeypatch.setenv("SKERRY_BOOTSTRAP", "192.0.2.1:1234")
    try:
        args = build_parser().parse_args(argv)
    finally:
        monkeypatch.delenv("SKERRY_BOOTSTRAP")
    return getattr(args, "bootstrap", None) == "192.0.2.1:1234"


def localize(command: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The documented command for this machine: ``.venv/bin/`` is this venv's ``bin`` (or
    ``python -m broker`` when it has no ``skerry`` script); a ``skerry`` command must take
    the broker from ``$SKERRY_BOOTSTRAP``."""
    argv = skerry_argv(command)
    if argv is not None and "--bootstrap" not in argv:
        # As written, the command must find the broker through $SKERRY_BOOTSTRAP (its
        # default when set) -- so a user's exported address works with every step.
        assert honours_bootstrap_env(argv, monkeypatch), command
    skerry = Path(sys.executable).parent / "skerry"
    programs = {"skerry": shlex.quote(str(skerry)) if skerry.exists()
                else f"{shlex.quote(sys.executable)} -m broker",
                "python": shlex.quote(sys.executable)}
    command = _VENV_RE.sub(lambda m: programs[m.group(1)], command)
    assert not re.search(r"(?<![\w/.])\.venv/", command), command
    return command


class Shell:
    """Runs documented commands in ``workdir`` with ``SKERRY_BOOTSTRAP`` set; each
    command's stderr is kept next to ``workdir`` (``<n>.stderr``)."""

    def __init__(self, workdir: Path, broker: BrokerProcess,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.workdir, self.monkeypatch = workdir, monkeypatch
        self.bootstrap = f"127.0.0.1:{broker.port}"
        # Only for speed: a pipeline run is a short JVM life, and C2 compilation costs more
        # than it saves there (about 10 s less per run on 2 cores; tests/spark/conftest.py's
        # session does the same).
        java = (os.environ.get("JAVA_TOOL_OPTIONS", "") + " -XX:TieredStopAtLevel=1").strip()
        self.env = dict(os.environ, SKERRY_BOOTSTRAP=self.bootstrap, PYTHONUNBUFFERED="1",
                        JAVA_TOOL_OPTIONS=java)
        self.ran = 0

    def run(self, command: str, timeout: float = 300) -> tuple[list[str], str]:
        """``(stdout lines, stderr)``; the command must succeed."""
        result = subprocess.run(["bash", "-c", localize(command, self.monkeypatch)],
                                cwd=self.workdir, env=self.env, stdin=subprocess.DEVNULL,
                                capture_output=True, timeout=timeout)
        out, err = (result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace"))
        self.ran += 1
        log = self.workdir.parent / f"{self.ran}.stderr"
        log.write_text(f"$ {command}\n{err}")
        if result.returncode != 0:
            lines = err.splitlines()
            errors = [line for line in lines if re.search(r"Exception|Error", line)
                      and not line.startswith("\tat ")][:10]
            pytest.fail(f"{command!r} exited with {result.returncode} (stderr in {log})\n"
                        f"stdout:\n{out}\nerrors:\n" + "\n".join(errors) +
                        "\nstderr ends:\n" + "\n".join(lines[-30:]))
        return out.splitlines(), err


# ------------------------------------------------------------------------ what the user sees


def topic_messages(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    """Every ``(key, value)`` of a topic, read with the Spark source's FETCH reader."""
    with Client(bootstrap) as client:
        meta = client.metadata(topic)
    earliest, hws = meta["earliest"], meta["hw"]
    assert isinstance(earliest, list) and isinstance(hws, list)
    opts = SkerryOptions({"bootstrap": bootstrap, "topic": topic})
    out: list[tuple[bytes | None, bytes]] = []
    for p, hw in enumerate(hws):
        for batch in read_range(opts, OffsetRange(topic, p, earliest[p], hw + 1)):
            columns = batch.to_pydict()
            out.extend(zip(columns["key"], columns["value"], strict=True))
    return out


def orders(bootstrap: str) -> list[tuple[str, int, float]]:
    """``(customer, event time ms, amount)`` of every order in the source topic."""
    out = []
    for key, value in topic_messages(bootstrap, SOURCE):
        event_ms, amount = value.decode().split(",")
        assert key is not None
        out.append((key.decode(), int(event_ms), float(amount)))
    return out


def closed_windows(all_orders: list[tuple[str, int, float]]) -> Windows:
    """What the pipeline must have written once it has read ``all_orders``: the counts and
    sums of the one-minute windows that end at or before the watermark (the newest event
    time minus one minute). None of the orders may have been late."""
    watermark = max(ms for _c, ms, _a in all_orders) - WATERMARK_MS
    counts: Counter[tuple[int, str]] = Counter()
    totals: Counter[tuple[int, str]] = Counter()
    for customer, ms, amount in all_orders:
        start = ms - ms % WINDOW_MS
        if start + WINDOW_MS <= watermark:
            counts[start, customer] += 1
            totals[start, customer] += amount
    return {k: (counts[k], totals[k]) for k in counts}


def assert_none_late(before: list[tuple[str, int, float]],
                     after: list[tuple[str, int, float]]) -> None:
    """No order added between ``before`` and ``after`` is behind the watermark ``before``
    set (the newest event time minus one minute): Spark would drop it as late."""
    watermark = max(ms for _c, ms, _a in before) - WATERMARK_MS
    added = Counter(after) - Counter(before)
    late = [order for order in added if order[1] < watermark]
    assert not late, f"{len(late)} of the new orders are late, e.g. {late[:3]}"


def parquet_rows(workdir: Path) -> list[tuple[int, str, int, float]]:
    """``(window start ms, customer, orders, total)`` per row of the Parquet output."""
    df = pd.read_parquet(workdir / FOLDER / "order-stats.parquet")
    assert list(df.columns) == ["window_start", "customer", "orders", "total"], df.dtypes
    return [(pd.Timestamp(w).value // 1_000_000, c, int(n), float(t))
            for w, c, n, t in zip(df["window_start"], df["customer"], df["orders"], df["total"],
                                  strict=True)]


def minute(ms: int) -> str:
    """A window start as the pipeline formats it into the topic (the session's time zone,
    the local one)."""
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def check_windows_line(out: list[str], written: Windows) -> None:
    """The run's ``order-stats: wrote N windows (R rows): ...`` line names the minutes of
    ``written`` (every one up to six, else the first and the last) and its row count."""
    minutes = sorted({minute(w) for w, _c in written})
    assert minutes, "the run wrote no window"
    shown = ", ".join(minutes) if len(minutes) <= 6 else f"{minutes[0]} to {minutes[-1]}"
    plural = "s" if len(minutes) > 1 else ""
    line = f"order-stats: wrote {len(minutes)} window{plural} ({len(written)} rows): {shown}"
    assert line in out, (line, out)


def seeded_line(out: list[str], count: int, continued: bool) -> None:
    """What ``pipeline seed`` prints: how many orders, their event times, and whether they
    continue after the orders already there."""
    assert len(out) == 1, out
    pattern = (rf"produced {count} orders to {SOURCE}; event times "
               r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d to \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
               + (", after the newest order already there" if continued else "") + "$")
    assert re.match(pattern, out[0]), out


def check_results(workdir: Path, bootstrap: str) -> Windows:
    """The Parquet rows and the sink topic's messages are exactly the closed windows of the
    orders in the source topic, each once; returns them."""
    expected = closed_windows(orders(bootstrap))
    rows = parquet_rows(workdir)
    keys = [(w, c) for w, c, _n, _t in rows]
    assert len(keys) == len(set(keys)), "a window written twice to Parquet"
    got = {(w, c): (n, t) for w, c, n, t in rows}
    assert got == expected
    messages = topic_messages(bootstrap, SINK)
    assert len(messages) == len(rows)
    values = [v.decode() for _k, v in messages]
    assert len(values) == len(set(values)), "a window written twice to the topic"
    assert sorted(values) == sorted(f"{minute(w)},{c},{n},{t!r}" for (w, c), (n, t) in got.items())
    assert all(k is not None and k.decode() == v.decode().split(",")[1] for k, v in messages)
    return got


# ------------------------------------------------------------------------ the test


class ExamplePipelineDocTests:
    def test_the_page_is_self_consistent(self) -> None:
        """Step 1 is the Install section's command and installs an extra that exists; step 2
        starts a broker where the pipeline looks for one by default; every command to run
        names the venv's programs (the venv is not activated); the flags step 6 names exist."""
        steps = page_steps()
        install = section(DOC.read_text(), "## Install")
        blocks = re.findall(r"^```\n(.*?)^```", install, re.S | re.M)
        assert commands(steps[1]) == [blocks[0].strip()] == [
            "python3 -m venv .venv && .venv/bin/pip install -q -e '.[spark]'"]
        extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
        assert {re.split(r"[<>=]", d)[0] for d in extras["spark"]} == {"pyspark", "pyarrow", "pandas"}
        assert commands(steps[2]) == [".venv/bin/skerry serve"]
        served = load_config(None, {}).values
        pipeline = build_parser().parse_args(["pipeline", "order-stats"])
        assert pipeline.bootstrap == f"{served['host']}:{served['port']}"
        for text in steps.values():
            for span in code_spans(text):
                if span.startswith("skerry "):  # naming a command in prose is fine, not running one
                    assert len(span.split()) <= 2, f"{span!r}: not on the PATH, write .venv/bin/{span}"
        help_text = build_parser()._subparsers._group_actions[0].choices["pipeline"].format_help()
        flags = [s for s in code_spans(steps[6]) if s.startswith("--")]
        assert len(flags) >= 5
        for flag in flags:
            assert flag in help_text, flag
        assert f"./{FOLDER}/order-stats.checkpoint" in code_spans(steps[6])

    def test_defaults_keep_apart_from_getting_started(self) -> None:
        """The pipeline's default topics are none of the topics the getting-started page
        writes or reads (its ``orders`` holds values that are not orders), and everything
        it writes by default is under the one folder docs/spark.md names, which git
        ignores."""
        page = GETTING_STARTED.read_text()
        started = set(re.findall(r"\|(?:PRODUCE|CONSUME|FETCH)\|([\w.-]+)", page))
        started |= {m.group(2) for m in re.finditer(
            r"skerry (produce|consume|topics \w+) ([\w.-]+)", page)}
        started |= set(re.findall(r"\|JOIN\|[\w.-]+ ([\w.-]+)", page))
        assert "orders" in started, started
        args = build_parser().parse_args(["pipeline", "order-stats"])
        assert (args.topic, args.sink_topic) == (SOURCE, SINK)
        assert not {args.topic, args.sink_topic} & started
        for path in (args.output, args.checkpoint):
            assert not Path(path).is_absolute() and Path(path).parts[0] == FOLDER, path
        assert f"`./{FOLDER}/`" in DOC.read_text()
        assert f"/{FOLDER}/" in GITIGNORE.read_text().splitlines()

    def test_steps_run_as_written(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Steps 2 to 6 on an empty broker, from an empty working directory."""
        steps = page_steps()
        seed = the_command(steps[3], containing="pipeline seed")
        pipeline = the_command(steps[4], containing="pipeline order-stats")
        show_parquet = the_command(steps[5], containing="read_parquet")
        show_topic = the_command(steps[5], containing=f"consume {SINK}")
        seed_more = the_command(steps[6], containing="pipeline seed")
        assert "run step 4 again" in steps[6]
        assert honours_bootstrap_env(skerry_argv(show_topic) or [], monkeypatch)
        workdir = tmp_path / "checkout"
        workdir.mkdir()

        with BrokerProcess(tmp_path / "broker") as broker:
            shell = Shell(workdir, broker, monkeypatch)
            count = int(shlex.split(seed)[-1])
            out, _ = shell.run(seed)
            seeded_line(out, count, continued=False)

            # Step 4.
            out, err = shell.run(pipeline)
            assert out[-1:] == [f"order-stats: results in topic {SINK} and "
                                f"./{FOLDER}/order-stats.parquet"], (out, err[-3000:])
            assert (workdir / FOLDER / "order-stats.checkpoint").is_dir()
            assert [p.name for p in workdir.iterdir()] == [FOLDER]
            first = check_results(workdir, shell.bootstrap)
            check_windows_line(out, first)
            assert sum(n for n, _t in first.values()) >= count - 3 * WINDOW_MS // 1000
            first_orders = orders(shell.bootstrap)
            assert len(first_orders) == count

            # Step 5: a table of the last results, and five of them from the topic.
            out, _ = shell.run(show_parquet)
            assert out[0].split() == ["window_start", "customer", "orders", "total"], out
            assert len(out) == 6, out
            for line in out[1:]:
                _index, day, clock, customer, n, total = line.split()
                w = int(pd.Timestamp(f"{day} {clock}").value // 1_000_000)
                assert first[w, customer] == (int(n), float(total)), line
            out, err = shell.run(show_topic)
            assert len(out) == 5, out
            values = {v.decode() for _k, v in topic_messages(shell.bootstrap, SINK)}
            assert set(out) <= values and all(MINUTE_RE.match(v) for v in out), out
            assert f"consumed 5 messages from {SINK}" in err

            # Step 6, straight away: seed more and run step 4 again.
            more = int(shlex.split(seed_more)[-1])
            out, _ = shell.run(seed_more)
            seeded_line(out, more, continued=True)
            assert_none_late(first_orders, orders(shell.bootstrap))
            out, _ = shell.run(pipeline)
            assert out[-1].startswith(f"order-stats: results in topic {SINK}")
            second = check_results(workdir, shell.bootstrap)
            assert len(orders(shell.bootstrap)) == count + more
            assert {k: v for k, v in second.items() if k in first} == first
            new = set(second) - set(first)
            assert new, "no window closed since the first run"
            assert min(w for w, _c in new) > max(w for w, _c in first)
            check_windows_line(out, {k: second[k] for k in new})
            assert [p.name for p in workdir.iterdir()] == [FOLDER]

    def test_a_second_seed_closes_new_windows(self, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """Step 3's seed, then step 6's at once (no Spark needed to see it): the new orders
        close at least one more window of the pipeline's and none of them is late (behind
        the watermark the first orders set), which Spark would drop."""
        steps = page_steps()
        seed = the_command(steps[3], containing="pipeline seed")
        seed_more = the_command(steps[6], containing="pipeline seed")
        workdir = tmp_path / "checkout"
        workdir.mkdir()
        with BrokerProcess(tmp_path / "broker") as broker:
            shell = Shell(workdir, broker, monkeypatch)
            shell.run(seed)
            first = orders(shell.bootstrap)
            shell.run(seed_more)
            both = orders(shell.bootstrap)
        assert len(both) == len(first) + int(shlex.split(seed_more)[-1])
        assert_none_late(first, both)
        assert set(closed_windows(both)) - set(closed_windows(first)), \
            "the second seed closed no window"
