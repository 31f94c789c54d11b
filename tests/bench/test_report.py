"""The benchmark report only ever rewrites its own section of docs/performance.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.loadgen import LoadResult
from bench.report import (
    BEGIN,
    END,
    MarkerError,
    comparison_rows,
    format_rate,
    reference_headroom,
    reference_ratios,
    reference_rows,
    render_terminal,
    replace_section,
    update_doc,
)
from bench.suite import Measurement, SuiteOptions, SuiteResult, reference_key, shape_name

STORE = "# Performance\n\n## Store\n\nappend: 1.2M msg/s\n"


class ReplaceSectionTests:
    def test_markers_appended_when_absent(self) -> None:
        """A page without markers keeps every line and gets the section at its end."""
        out = replace_section(STORE, "table v1")
        assert out == STORE + "\n" + f"{BEGIN}\ntable v1\n{END}\n"

    def test_only_the_text_between_markers_changes(self) -> None:
        """Text before and after the markers (another engineer's section) is untouched."""
        page = f"{STORE}\n{BEGIN}\nold table\nold chart\n{END}\n\n## Later\n\ntext\n"
        out = replace_section(page, "new table\n")
        assert out == f"{STORE}\n{BEGIN}\nnew table\n{END}\n\n## Later\n\ntext\n"
        assert replace_section(out, "new table") == out

    def test_damaged_markers_are_refused(self) -> None:
        """One marker without the other, or the two out of order, raise instead of
        rewriting a guess."""
        for page in (f"a\n{BEGIN}\nb\n", f"a\n{END}\nb\n", f"{END}\nx\n{BEGIN}\n",
                     f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n"):
            with pytest.raises(MarkerError):
                replace_section(page, "x")


class UpdateDocTests:
    def test_missing_file_is_created(self, tmp_path: Path) -> None:
        """Without docs/performance.md the tool creates it, with a title and the section."""
        path = tmp_path / "docs" / "performance.md"
        update_doc(path, "table")
        assert path.read_text() == f"# Performance\n\n{BEGIN}\ntable\n{END}\n"

    def test_existing_file_keeps_the_other_sections(self, tmp_path: Path) -> None:
        """Rewriting twice keeps the store section and leaves only the latest table."""
        path = tmp_path / "performance.md"
        path.write_text(STORE)
        update_doc(path, "first")
        update_doc(path, "second")
        text = path.read_text()
        assert text.startswith(STORE)
        assert "first" not in text and text.count(BEGIN) == 1
        assert text.endswith(f"{BEGIN}\nsecond\n{END}\n")
        assert list(tmp_path.iterdir()) == [path]


def test_rates_are_short_and_readable() -> None:
    """Rates print with three significant digits and a k / M suffix."""
    assert [format_rate(x) for x in (None, 12.0, 8360.0, 85_700.0, 1_234_567.0)] == [
        "n/a", "12", "8.36k", "85.7k", "1.23M"]


def _result(rate: float) -> LoadResult:
    return LoadResult(protocol="v1", mode="produce", connections=50, inflight=1, processes=1,
                      loop="C", window_s=1.0, requests=int(rate), messages=int(rate),
                      requests_per_s=rate, messages_per_s=rate)


def test_reference_table_compares_python_with_c_on_the_same_server() -> None:
    """The C reference client's table puts the Python generator's figure on the same server
    beside the C client's, and the headroom line divides the C client's responder rate by its
    rate on each server (what any client could show on this machine)."""
    suite = SuiteResult(options=SuiteOptions(), machine={}, command="x", started="now")
    suite.measurements["a"] = {"skerry": Measurement(result=_result(30_000.0)),
                               "redis": Measurement(result=_result(45_000.0))}
    suite.ceilings[shape_name(("produce", 50, 1))] = {
        "v1": Measurement(result=_result(60_000.0)), "resp": Measurement(result=_result(80_000.0))}
    suite.reference = {"responder v1": Measurement(result=_result(120_000.0)),
                       "responder resp": Measurement(result=_result(100_000.0)),
                       "skerry": Measurement(result=_result(40_000.0)),
                       "redis": Measurement(result=_result(50_000.0))}
    rows = reference_rows(suite)
    assert rows[1] == ["canned-reply responder, V1 replies", "120k", "60k", "0.50"]
    assert rows[3] == ["Skerry, workload (a)", "40k", "30k", "0.75"]
    assert rows[4] == ["Redis, workload (a)", "50k", "45k", "0.90"]
    assert reference_headroom(suite) == ["Skerry 3.0x", "Redis 2.0x"]


def test_the_table_has_a_twisted_ceiling_column() -> None:
    """With the Twisted ceiling measured, each row shows it and Skerry's share of it; the
    section names the implementation the Skerry figures used."""
    suite = SuiteResult(options=SuiteOptions(), machine={}, command="x", started="now")
    suite.measurements["a"] = {"skerry": Measurement(result=_result(30_000.0)),
                               "redis": Measurement(result=_result(45_000.0))}
    suite.twisted["a"] = Measurement(result=_result(40_000.0))
    rows = comparison_rows(suite)
    assert rows[0][4:6] == ["Twisted ceiling msg/s", "Skerry/Twisted"]
    assert rows[1][1:6] == ["30k", "45k", "0.67x", "40k", "0.75x"]
    suite.implementation = "per-message loops: compiled (data._cspeedups)"
    assert "Skerry: per-message loops: compiled" in render_terminal(suite)
    suite.reference = {"twisted": Measurement(result=_result(50_000.0)),
                       "skerry": Measurement(result=_result(45_000.0))}
    assert reference_rows(suite)[1] == [
        "do-nothing Twisted line responder (the Twisted ceiling)", "50k", "40k", "0.80"]
    assert "C client, workload (a): 0.90x" in render_terminal(suite)


def test_the_c_client_also_compares_the_servers_with_persistence() -> None:
    """(d) and (e) put (a)'s load on servers set up with persistence: the C client's rows
    for them sit beside the Python generator's figure of that workload (not (a)'s), and the
    Skerry/Redis line gives each workload measured on both servers, none for one measured
    on a single server."""
    suite = SuiteResult(options=SuiteOptions(), machine={}, command="x", started="now")
    suite.measurements["a"] = {"skerry": Measurement(result=_result(90_000.0)),
                               "redis": Measurement(result=_result(80_000.0))}
    suite.measurements["d"] = {"skerry": Measurement(result=_result(50_000.0)),
                               "redis": Measurement(result=_result(52_000.0))}
    suite.measurements["e"] = {"skerry": Measurement(result=_result(99_000.0))}
    suite.reference = {"skerry": Measurement(result=_result(120_000.0)),
                       "redis": Measurement(result=_result(100_000.0)),
                       "skerry d": Measurement(result=_result(66_000.0)),
                       "redis d": Measurement(result=_result(60_000.0)),
                       "skerry e": Measurement(result=_result(110_000.0))}
    rows = {row[0]: row[1:] for row in reference_rows(suite)[1:]}
    assert rows["Skerry, workload (d)"] == ["66k", "50k", "0.76"]
    assert rows["Redis, workload (d)"] == ["60k", "52k", "0.87"]
    assert rows["Skerry, workload (e)"] == ["110k", "99k", "0.90"]
    assert "Redis, workload (e)" not in rows
    assert reference_ratios(suite) == ["(a) 1.20x", "(d) 1.10x"]
    assert "Skerry / Redis with the C client: (a) 1.20x, (d) 1.10x" in render_terminal(suite)
    assert reference_key("skerry", "a") == "skerry"
    assert reference_key("redis", "e") == "redis e"
