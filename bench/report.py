"""The benchmark report: tables, charts and the bench section of docs/performance.md.

Owns: formatting a suite result as a terminal table and as Markdown, drawing the PNG
charts (``docs/perf-*.png``), and rewriting the text between the marker lines
``<!-- bench:begin -->`` and ``<!-- bench:end -->`` of the shared performance page. Only
that text is ever rewritten: the markers are appended at the end when absent, the file is
created when missing, and a page with one marker but not the other, or with them in the
wrong order, is refused rather than guessed at.

Must not import: broker internals; ``bench.suite`` at module level (it imports this).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.loadgen import LoadResult
from bench.servers import REPO_ROOT

if TYPE_CHECKING:
    from bench.suite import Measurement, SuiteResult

__all__ = [
    "BEGIN",
    "END",
    "DEFAULT_DOC",
    "MarkerError",
    "replace_section",
    "update_doc",
    "format_rate",
    "describe",
    "comparison_rows",
    "ceiling_rows",
    "reference_rows",
    "reference_headroom",
    "reference_ratios",
    "twisted_share",
    "render_terminal",
    "render_section",
    "draw_charts",
]

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
DEFAULT_DOC = REPO_ROOT / "docs" / "performance.md"
THROUGHPUT_CHART = "perf-throughput.png"
LATENCY_CHART = "perf-latency.png"


class MarkerError(ValueError):
    """The page's bench markers are damaged (one missing, or out of order)."""


# ------------------------------------------------------------------------- the doc section


def replace_section(text: str, body: str) -> str:
    """``text`` with everything between the bench markers replaced by ``body``.

    Markers are whole lines. When neither is present they are appended at the end of the
    text (after one blank line); everything outside them is returned unchanged.
    """
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    block = BEGIN + "\n" + body.strip("\n") + "\n" + END + "\n"
    if not begins and not ends:
        if not text:
            return block
        sep = "" if text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + block
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        raise MarkerError(f"expected one {BEGIN} line followed by one {END} line; found "
                          f"{len(begins)} and {len(ends)}")
    before = "".join(lines[:begins[0]])
    after = "".join(lines[ends[0] + 1:])
    return before + block + after


def update_doc(path: Path, body: str) -> None:
    """Rewrite the bench section of ``path`` (created with a title when missing)."""
    if path.exists():
        text = path.read_text()
    else:
        text = "# Performance\n"
    new = replace_section(text, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ------------------------------------------------------------------------- formatting


def format_rate(value: float | None) -> str:
    """``1234567`` -> ``1.23M``, ``85700`` -> ``85.7k``."""
    if value is None:
        return "n/a"
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= div:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.3g}"


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _latency(result: LoadResult | None) -> str:
    if result is None:
        return "n/a"
    p = result.percentiles()
    if not p:
        return "n/a"
    return f"{_ms(p['p50'])} / {_ms(p['p99'])} / {_ms(p['p999'])}"


def describe(result: LoadResult | None, error: str | None = None) -> str:
    """One line for the progress log."""
    if error:
        return f"FAILED: {error.splitlines()[0]}"
    if result is None:
        return "n/a"
    unit = "msg/s" if result.mode == "produce" else f"msg/s ({result.requests_per_s:.0f} req/s)"
    return (f"{format_rate(result.messages_per_s)} {unit}, latency ms p50/p99/p99.9 "
            f"{_latency(result)}, {result.requests} requests in {result.window_s:.1f} s")


def _rate(m: Measurement | None) -> float | None:
    if m is None or m.error or m.result is None:
        return None
    return m.result.messages_per_s


def _cell(m: Measurement | None) -> str:
    if m is None:
        return "not run"
    if m.error:
        return "failed"
    if len(m.rates) > 1:
        return (f"{format_rate(_rate(m))} ({format_rate(min(m.rates))}–"
                f"{format_rate(max(m.rates))})")
    return format_rate(_rate(m))


def comparison_rows(result: SuiteResult) -> list[list[str]]:
    """Header plus one row per workload: rates, ratio and latency percentiles."""
    from bench.suite import WORKLOADS

    twisted = bool(result.twisted)
    rows = [["workload", "Skerry msg/s", "Redis msg/s", "Skerry/Redis",
             *(["Twisted ceiling msg/s", "Skerry/Twisted"] if twisted else []),
             "Skerry p50/p99/p99.9 ms", "Redis p50/p99/p99.9 ms"]]
    for wl in WORKLOADS:
        if wl.key not in result.measurements:
            continue
        by = result.measurements[wl.key]
        sk, rd = by.get("skerry"), by.get("redis")
        s_rate, r_rate = _rate(sk), _rate(rd)
        ratio = f"{s_rate / r_rate:.2f}x" if s_rate is not None and r_rate else "n/a"
        extra = []
        if twisted:
            tw = result.twisted.get(wl.key)
            t_rate = _rate(tw)
            extra = [_cell(tw), f"{s_rate / t_rate:.2f}x" if s_rate is not None and t_rate else "n/a"]
        rows.append([f"({wl.key}) {wl.title}", _cell(sk), _cell(rd), ratio, *extra,
                     _latency(sk.result if sk and not sk.error else None),
                     _latency(rd.result if rd and not rd.error else None)])
    return rows


def ceiling_rows(result: SuiteResult) -> list[list[str]]:
    """Header plus one row per load shape: the generator's ceiling and its headroom."""
    from bench.suite import WORKLOADS, shape_name

    rows = [["load shape", "V1 ceiling msg/s", "RESP ceiling msg/s", "ceiling / Skerry",
             "ceiling / Redis"]]
    for name, by in result.ceilings.items():
        fastest: dict[str, float] = {}
        for wl in WORKLOADS:
            if shape_name(wl.shape) != name or wl.key not in result.measurements:
                continue
            for system in ("skerry", "redis"):
                rate = _rate(result.measurements[wl.key].get(system))
                if rate is not None:
                    fastest[system] = max(fastest.get(system, 0.0), rate)
        cells = [name, _cell(by.get("v1")), _cell(by.get("resp"))]
        for system, proto in (("skerry", "v1"), ("redis", "resp")):
            ceiling = _rate(by.get(proto))
            best = fastest.get(system)
            cells.append(f"{ceiling / best:.1f}x" if ceiling and best else "n/a")
        rows.append(cells)
    return rows


_REFERENCE_TARGETS = (
    ("responder v1", "canned-reply responder, V1 replies"),
    ("responder resp", "canned-reply responder, RESP replies"),
    ("twisted", "do-nothing Twisted line responder (the Twisted ceiling)"),
    ("skerry", "Skerry, workload (a)"),
    ("redis", "Redis, workload (a)"),
    ("skerry d", "Skerry, workload (d)"),
    ("redis d", "Redis, workload (d)"),
    ("skerry e", "Skerry, workload (e)"),
    ("redis e", "Redis, workload (e)"),
)


def _reference_python(result: SuiteResult, key: str) -> Measurement | None:
    """The Python generator's figure on the same server and load as reference ``key``."""
    from bench.suite import REFERENCE_WORKLOAD, WORKLOADS, shape_name

    if key.startswith("responder "):
        wl = next(w for w in WORKLOADS if w.key == REFERENCE_WORKLOAD)
        return result.ceilings.get(shape_name(wl.shape), {}).get(key.split()[1])
    if key == "twisted":
        return result.twisted.get(REFERENCE_WORKLOAD)
    system, _, workload = key.partition(" ")
    return result.measurements.get(workload or REFERENCE_WORKLOAD, {}).get(system)


def reference_rows(result: SuiteResult) -> list[list[str]]:
    """Header plus one row per server the C reference client ran against."""
    rows = [["server", "C client msg/s", "Python generator msg/s", "Python / C"]]
    for key, label in _REFERENCE_TARGETS:
        ref = result.reference.get(key)
        if ref is None:
            continue
        py = _reference_python(result, key)
        c_rate, py_rate = _rate(ref), _rate(py)
        rows.append([label, _cell(ref), _cell(py),
                     f"{py_rate / c_rate:.2f}" if c_rate and py_rate else "n/a"])
    return rows


def reference_headroom(result: SuiteResult) -> list[str]:
    """For each server: the C client's rate on the responder divided by its rate on that
    server -- the most headroom any client can show on this machine for this load."""
    out = []
    for system, proto, name in (("skerry", "v1", "Skerry"), ("redis", "resp", "Redis")):
        on_server = _rate(result.reference.get(system))
        on_responder = _rate(result.reference.get(f"responder {proto}"))
        if on_server and on_responder:
            out.append(f"{name} {on_responder / on_server:.1f}x")
    return out


def reference_ratios(result: SuiteResult) -> list[str]:
    """Skerry's rate over Redis's, both with the C reference client, for each workload it
    ran on both servers (``"(d) 1.05x"``): the comparison with the Python generator out of
    the way."""
    from bench.suite import SERVER_REFERENCE_WORKLOADS, reference_key

    out = []
    for workload in SERVER_REFERENCE_WORKLOADS:
        on_skerry = _rate(result.reference.get(reference_key("skerry", workload)))
        on_redis = _rate(result.reference.get(reference_key("redis", workload)))
        if on_skerry and on_redis:
            out.append(f"({workload}) {on_skerry / on_redis:.2f}x")
    return out


def twisted_share(result: SuiteResult) -> str | None:
    """Target (a) of issue 21: Skerry's request/response figure over the do-nothing Twisted
    responder's, both with the C reference client, in the same run."""
    on_skerry = _rate(result.reference.get("skerry"))
    on_twisted = _rate(result.reference.get("twisted"))
    if on_skerry and on_twisted:
        return f"{on_skerry / on_twisted:.2f}x"
    return None


def _markdown(rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(out)


def _aligned(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _failures(result: SuiteResult) -> list[str]:
    return result.failures()


def render_terminal(result: SuiteResult) -> str:
    parts = ["", _aligned(comparison_rows(result))]
    if result.implementation:
        parts += [f"Skerry: {result.implementation}"]
    if result.ceilings:
        parts += ["", "Load generator ceiling (canned-reply responder):",
                  _aligned(ceiling_rows(result))]
    if len(reference_rows(result)) > 1:
        parts += ["", "C reference client, request/response load:",
                  _aligned(reference_rows(result))]
        headroom = reference_headroom(result)
        if headroom:
            parts += ["most headroom any client shows here (C client: responder / server): "
                      + ", ".join(headroom)]
        ratios = reference_ratios(result)
        if ratios:
            parts += ["Skerry / Redis with the C client: " + ", ".join(ratios)]
        share = twisted_share(result)
        if share:
            parts += [f"Skerry / Twisted ceiling with the C client, workload (a): {share}"]
    failures = _failures(result)
    if failures:
        parts += ["", "Failures:"] + [f"  {f}" for f in failures]
    return "\n".join(parts)


def _settings_lines(result: SuiteResult) -> list[str]:
    from bench.suite import WORKLOADS

    groups: dict[tuple[str, str], list[str]] = {}
    for wl in WORKLOADS:
        if wl.key in result.measurements:
            groups.setdefault((wl.skerry_setting, wl.redis_setting), []).append(f"({wl.key})")
    return [f"- {', '.join(keys)}: Skerry `storage.fsync: {skerry}` against Redis {redis}."
            for (skerry, redis), keys in groups.items()]


def _below_target(result: SuiteResult, target: float = 3.0) -> list[str]:
    out = []
    for row in ceiling_rows(result)[1:]:
        for system, cell in (("Skerry", row[3]), ("Redis", row[4])):
            if cell.endswith("x") and float(cell[:-1]) < target:
                out.append(f"{system} on \"{row[0]}\" ({cell})")
    return out


def render_section(result: SuiteResult, doc_dir: Path, charts: Sequence[Path]) -> str:
    """The Markdown that goes between the bench markers."""
    m = result.machine
    opts = result.options
    loop = _loop_used(result)
    lines = [
        "## Skerry against Redis Streams",
        "",
        "_Written by `bench/run_all`; everything between the bench markers is replaced on "
        "each run._",
        "",
        f"Measured {result.started} on {m['cpu']}, {m['cores']} cores, {m['memory']} RAM "
        f"({m['os']}, Python {m['python']}, Redis {m['redis']}); data directories in "
        f"{m.get('data_root', '?')} on {m.get('data_fs', '?')}. Load average "
        f"{m['loadavg']} before the run, {result.loadavg_after} after it.",
        "",
        f"Command: `{result.command}`",
        "",
        _markdown(comparison_rows(result)),
        "",
        f"Rates are messages per second inside a {opts.duration_s:g} s window after a "
        f"{opts.warmup_s:g} s warm-up; latency is per request, in milliseconds, from the "
        "write of the request to its reply (for the pipelined load it includes the wait "
        f"behind the other requests in flight; for consume it is per batch of {opts.batch}). "
        f"Values are {opts.value_size} bytes."
        + (f" Each figure is the median of {opts.repeat} runs (servers started afresh for "
           "each, the two systems in turn), with the range of all runs in brackets; its "
           "latency percentiles are those of that median run." if opts.repeat > 1 else ""),
        "",
        *_settings_lines(result),
    ]
    if result.implementation:
        lines += ["", f"Skerry's {result.implementation} in every Skerry figure above "
                      "(the line `skerry serve` logs; docs/performance.md, \"Compiled loops\", "
                      "says how to build or disable them)."]
    if result.twisted:
        lines += ["", "The Twisted ceiling column is a do-nothing Twisted line responder "
                      "(`bench/twisted_ceiling.py`: Twisted's default reactor, one "
                      "`bytes.count` and one `write` a read, a canned reply of the broker's "
                      "shape) under the same load as each Skerry workload, in the same run: "
                      "what the reactor carries when the broker does no work; Skerry/Twisted "
                      "is the share of it the broker keeps."]
    if result.fill:
        counts = set(result.fill.values())
        filled = (f"{counts.pop():,}" if len(counts) == 1 else
                  ", ".join(f"{k.capitalize()} {v:,}" for k, v in result.fill.items()))
        lines += ["", f"The consume workload (c) walks a partition / stream filled with "
                      f"{filled} messages just before, and starts over at its end."]
    if result.ceilings:
        lines += [
            "",
            "### Load generator ceiling",
            "",
            "The same load against a responder that answers every request at once with a "
            f"canned reply of the real server's shape ({result.responder}): what "
            "the generator itself can do on this machine. The headroom columns divide that "
            "ceiling by the fastest figure measured with the same load shape; the target is "
            "3x, below which that figure is partly limited by the generator (or by the two "
            "cores it shares with the server).",
            "",
            _markdown(ceiling_rows(result)),
        ]
        below = _below_target(result)
        if below:
            lines += ["", "Below the 3x target in this run: " + "; ".join(below) + ". Those "
                      "figures are lower bounds of what the server can do."]
    if len(reference_rows(result)) > 1:
        headroom = reference_headroom(result)
        lines += [
            "",
            "### A C client on the request/response load",
            "",
            "`bench/refclient.c` runs workload (a)'s load (the same request bytes, "
            "connections and window, one request in flight per connection) with no Python on "
            "the client side, against the canned-reply responder and against both servers, "
            "also as each is set up for (d) and (e), which put the same load on them. "
            "Against the responder it shows what any client can get from this machine for "
            "this load shape (the kernel's per-request cost on both ends bounds it); against "
            "the servers it shows how much of each server's figure the Python generator "
            "leaves on the table.",
            "",
            _markdown(reference_rows(result)),
        ]
        if headroom:
            lines += ["", "The most headroom any client can show on this machine for this "
                      "load (C client on the responder / C client on the server): "
                      + ", ".join(headroom) + "."]
        ratios = reference_ratios(result)
        if ratios:
            lines += ["", "Skerry against Redis with the C client on both (the Python "
                      "generator's ceiling out of the way): " + ", ".join(ratios) + "."]
        share = twisted_share(result)
        if share:
            lines += ["", "Skerry against the do-nothing Twisted line responder on this load, "
                      f"both with the C client (issue 21's target (a) is 0.9x): {share}."]
        failed = [f"{key}: {m.error}" for key, m in result.reference.items() if m.error]
        if failed:
            lines += ["", "C reference client not measured: " + "; ".join(failed) + "."]
    lines += [
        "",
        "### How it is measured",
        "",
        f"- One load generator (`bench/loadgen.py`, Python asyncio Protocols on {loop}) "
        "speaks both V1 and RESP with the same connection loops; requests are encoded once, "
        "replies are counted with `bytes.count` over whole reads (RESP bulk replies are "
        "paired line by line, errors checked), and any error reply stops the load.",
        "- Skerry: one topic with one partition, `PRODUCE` with the default `acks=1`, "
        "`CONSUME ... max=1000`. Redis: one stream, `XADD <stream> * v <value>`, "
        "`XRANGE <stream> (<last id> + COUNT 1000`.",
        "- Each server runs alone, started fresh for each persistence setting with an empty "
        "temporary data directory, on 127.0.0.1; Redis gets all its settings on the command "
        "line (`--save ''`, no config file).",
        f"- The machine has {m['cores']} cores, shared by the server under test and the load "
        f"generator ({opts.load_processes} load process"
        f"{'es' if opts.load_processes > 1 else ''} for the 50-connection loads, one for the "
        "single-connection ones"
        + (", generator pinned to CPU 0 and servers to CPU 1" if opts.pin else ", unpinned")
        + "). Other work on the machine during the run shows in the load averages above.",
    ]
    names = {c.name for c in charts}
    if THROUGHPUT_CHART in names:
        lines += ["", f"![Throughput, Skerry and Redis]({THROUGHPUT_CHART})"]
    if LATENCY_CHART in names:
        lines += ["", f"![Latency percentiles, Skerry and Redis]({LATENCY_CHART})"]
    failures = _failures(result)
    if failures:
        lines += ["", "Not measured in this run:", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


def _loop_used(result: SuiteResult) -> str:
    for by in result.measurements.values():
        for m in by.values():
            if m.result is not None:
                return m.result.loop
    return result.options.loop


# ------------------------------------------------------------------------- charts


def draw_charts(result: SuiteResult, out_dir: Path) -> list[Path]:
    """Write ``perf-throughput.png`` and ``perf-latency.png``; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    from bench.suite import WORKLOADS

    keys = [w.key for w in WORKLOADS if w.key in result.measurements]
    if not keys:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    colors = {"skerry": "#1f77b4", "redis": "#d62728"}

    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.38
    for i, system in enumerate(("skerry", "redis")):
        xs, ys = [], []
        for j, key in enumerate(keys):
            rate = _rate(result.measurements[key].get(system))
            if rate:
                xs.append(j + (i - 0.5) * width)
                ys.append(rate)
        bars = ax.bar(xs, ys, width, label=system.capitalize(), color=colors[system])
        ax.bar_label(bars, labels=[format_rate(y) for y in ys], fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(keys)), [f"({k})" for k in keys])
    ax.set_ylabel("messages / s (log scale)")
    ax.set_title("Throughput: " + "; ".join(
        f"({w.key}) {w.title.split(',')[0]}" for w in WORKLOADS if w.key in keys), fontsize=8)
    ax.legend()
    fig.tight_layout()
    path = out_dir / THROUGHPUT_CHART
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    series: list[tuple[str, str, str, Any]] = []
    for system in ("skerry", "redis"):
        for pct, alpha in (("p50", 1.0), ("p99", 0.6), ("p999", 0.3)):
            series.append((system, pct, f"{system.capitalize()} {pct}", alpha))
    width = 0.8 / len(series)
    drawn = False
    for i, (system, pct, label, alpha) in enumerate(series):
        xs, ys = [], []
        for j, key in enumerate(keys):
            m = result.measurements[key].get(system)
            if m is None or m.error or m.result is None:
                continue
            p = m.result.percentiles()
            if p:
                xs.append(j - 0.4 + (i + 0.5) * width)
                ys.append(max(p[pct], 0.001))
        if xs:
            drawn = True
            ax.bar(xs, ys, width, label=label, color=colors[system], alpha=alpha)
    ax.set_yscale("log")
    ax.set_xticks(range(len(keys)), [f"({k})" for k in keys])
    ax.set_ylabel("latency, ms (log scale)")
    ax.set_title("Latency per request (consume: per batch of 1000)", fontsize=9)
    if drawn:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = out_dir / LATENCY_CHART
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written
