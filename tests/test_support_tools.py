"""``tests.support.debian_tool``: a program the system tests need is looked up, never
installed by pytest. Missing, a developer sees a skip with a one-line reason naming the
Debian package and ``.ci/install-tools``; in CI (``CI`` set) the same miss is a failure, so
CI never passes by skipping what it should have run."""

from __future__ import annotations

import pytest
from _pytest.outcomes import Failed, Skipped

from tests.support import debian_tool

MARKERS = ()  # it only looks programs up that do not exist (tests/conftest.py)

ABSENT = "skerry-no-such-program"


def test_a_present_program_is_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert debian_tool("sh", "dash").endswith("/sh")


def test_a_missing_program_skips_locally_with_the_package(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(BaseException) as caught:
        debian_tool(ABSENT, "skerry-pkg")
    assert caught.type is Skipped, caught.type
    assert str(caught.value) == (f"{ABSENT} is not installed (Debian package skerry-pkg; "
                                 ".ci/install-tools installs it)")


def test_a_missing_program_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(BaseException) as caught:  # a Skipped here must fail this test
        debian_tool(ABSENT, "skerry-pkg")
    assert caught.type is Failed, caught.type
    assert "CI is set" in str(caught.value)
