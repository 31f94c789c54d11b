"""The control plane's session file: what the next run reads to revoke this run's lease."""

from __future__ import annotations

from pathlib import Path

from broker.services.control.session import SessionFile


class SessionFileTests:
    def test_a_written_session_is_read_back(self, tmp_path: Path) -> None:
        """The lease and incarnation written are what the next run reads, and no
        temporary file is left beside it."""
        session = SessionFile(tmp_path / "cluster-session.json")
        session.write(0x1234, 7)
        assert SessionFile(tmp_path / "cluster-session.json").read() == (0x1234, 7)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster-session.json"]

    def test_a_torn_temporary_file_does_not_replace_the_session(self, tmp_path: Path) -> None:
        """A crash while writing leaves the previous session readable (the new one goes to
        a temporary file first and replaces the old one whole)."""
        session = SessionFile(tmp_path / "cluster-session.json")
        session.write(5, 2)
        (tmp_path / "cluster-session.json.tmp").write_text('{"lea')
        assert session.read() == (5, 2)

    def test_no_or_damaged_file_is_a_first_run(self, tmp_path: Path) -> None:
        """Without a readable file there is no lease to revoke: (0, 0)."""
        path = tmp_path / "cluster-session.json"
        assert SessionFile(path).read() == (0, 0)
        path.write_text("not json")
        assert SessionFile(path).read() == (0, 0)
        path.write_text("[1, 2]")
        assert SessionFile(path).read() == (0, 0)
