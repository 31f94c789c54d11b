"""The benchmark report only ever rewrites its own section of docs/performance.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report import BEGIN, END, MarkerError, format_rate, replace_section, update_doc

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
