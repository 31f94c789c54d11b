"""Every relative reference of README.md and the pages under docs/ leads to something in the
repository, as a reader of a fresh checkout (or of the repository on GitHub) follows it.

What is checked:

- markdown links ``[text](target)`` and images ``![alt](target)``, reference definitions
  ``[label]: target`` and HTML ``href``/``src`` attributes: a target without a scheme must
  be a file or folder inside the repository, relative to the page;
- their ``#anchor`` fragments: when the target is a markdown page (or the page itself), the
  anchor must be one GitHub makes for one of its headings (``heading_anchors``);
- code spans that name a repository path (``broker/iggy/codec.py``, ``tests/spark/``,
  ``tests/v1/test_codec*.py``), relative to the repository root as the pages write
  them: the path must exist (a glob must match something). Spans with placeholders
  (``topics/<topic>/``) and paths in the reader's working directory (``./skerry-data``)
  name files a running broker or pipeline makes, not repository files, and are skipped.

Fenced code blocks are not prose: nothing inside them is checked.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from tests.support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE_RE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
_INLINE_LINK_RE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
_REFERENCE_RE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
_HTML_RE = re.compile(r"""<[a-zA-Z][^>]*?\b(?:href|src)\s*=\s*["']([^"']*)["']""")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")
_CODE_SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_PATH_SPAN_RE = re.compile(r"[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)*/?")
_EXTENSION_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_ATX_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
_SETEXT_RE = re.compile(r"^ {0,3}(\S[^\n]*)\n {0,3}(?:=+|-+)[ \t]*$", re.M)
_HTML_ANCHOR_RE = re.compile(r"""<[a-zA-Z][^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""")


def prose(markdown: str) -> str:
    """The page without its fenced code blocks."""
    return _FENCE_RE.sub("", markdown)


def link_targets(markdown: str) -> list[str]:
    """The targets of the page's markdown links, images, reference definitions and HTML
    ``href``/``src`` attributes, in order."""
    text = _CODE_SPAN_RE.sub(lambda m: " " * len(m.group(0)), prose(markdown))
    found = [m.group(1) for m in _INLINE_LINK_RE.finditer(text)]
    found += [m.group(1) for m in _REFERENCE_RE.finditer(text)]
    found += [m.group(1) for m in _HTML_RE.finditer(text)]
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in found]


def github_slug(text: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): lower case, every character
    that is not a letter, mark, number, ``-``, ``_`` or space removed, spaces made ``-``."""
    kept = "".join(ch for ch in text.lower()
                   if ch in "-_ " or unicodedata.category(ch)[0] in "LMN")
    return kept.replace(" ", "-")


def heading_text(raw: str) -> str:
    """A heading's text as GitHub renders it: the text of links and images, code spans
    without their backticks, no HTML tags (emphasis markers go with the punctuation)."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").strip()


def heading_anchors(markdown: str) -> set[str]:
    """Every ``#anchor`` GitHub makes for the page: one per heading (a repeated slug gets
    ``-1``, ``-2``, ... as github-slugger does), plus explicit HTML ``id``/``name``s."""
    text = prose(markdown)
    headings = [(m.start(), m.group(2)) for m in _ATX_RE.finditer(text)]
    headings += [(m.start(), m.group(1)) for m in _SETEXT_RE.finditer(text)
                 if not _ATX_RE.match(m.group(1)) and not m.group(1).lstrip().startswith(("|", "-", "*"))]
    anchors: set[str] = set()
    for _pos, raw in sorted(headings):
        base = slug = github_slug(heading_text(raw))
        n = 0
        while slug in anchors:
            n += 1
            slug = f"{base}-{n}"
        anchors.add(slug)
    anchors.update(m.group(1) for m in _HTML_ANCHOR_RE.finditer(text))
    return anchors


def path_spans(markdown: str) -> list[str]:
    """The code spans of the page's prose that name a repository path: relative paths (no
    spaces, no placeholders) that either start with one of the repository's top-level
    entries or end in a file extension. Paths in the working directory (``./...``) are not
    repository paths; ``../...`` ones are (and leave it)."""
    top = {p.name for p in ROOT.iterdir()}
    found = []
    for match in _CODE_SPAN_RE.finditer(prose(markdown)):
        span = match.group(2).strip()
        if span.startswith("../"):
            found.append(span)
            continue
        if "/" not in span or span.startswith("./") or not _PATH_SPAN_RE.fullmatch(span):
            continue
        if span.split("/")[0] in top or _EXTENSION_RE.search(span.rstrip("/")):
            found.append(span)
    return found


def inside_repository(path: Path) -> bool:
    resolved = path.resolve()
    return resolved == ROOT or ROOT in resolved.parents


def dead_links(page: Path, markdown: str | None = None) -> list[str]:
    """``"<page>: <target> (why)"`` for every relative reference of ``page`` (its text:
    ``markdown``, else the file's) that leads nowhere in the repository."""
    if markdown is None:
        markdown = page.read_text(encoding="utf-8")
    where = page.relative_to(ROOT)
    dead = []
    for target in link_targets(markdown):
        if not target or _SCHEME_RE.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        if not path_part:  # an anchor of the page itself
            if anchor not in heading_anchors(markdown):
                dead.append(f"{where}: {target} (no heading with that anchor)")
            continue
        destination = page.parent / path_part
        if not inside_repository(destination):
            dead.append(f"{where}: {target} (outside the repository)")
        elif not destination.exists():
            dead.append(f"{where}: {target} (no such file)")
        elif anchor and destination.suffix == ".md" and destination.is_file() and \
                anchor not in heading_anchors(destination.read_text(encoding="utf-8")):
            dead.append(f"{where}: {target} (no heading with that anchor)")
    for span in path_spans(markdown):
        destination = ROOT / span
        if not inside_repository(destination):
            dead.append(f"{where}: `{span}` (outside the repository)")
        elif not (any(ROOT.glob(span.rstrip("/"))) if "*" in span else destination.exists()):
            dead.append(f"{where}: `{span}` (not in the repository)")
    return dead


class DocLinkTests:
    def test_every_relative_link_resolves(self) -> None:
        """Every relative link, anchor and repository path named in README.md and docs/
        leads to a file, folder or heading of the repository."""
        assert len(PAGES) > 5
        dead = [line for page in PAGES for line in dead_links(page)]
        assert not dead, "dead links:\n" + "\n".join(dead)

    def test_the_checker_finds_what_it_should(self) -> None:
        """The extraction sees inline, reference and HTML links (not those in code blocks),
        path code spans (not working-directory paths or placeholders), and GitHub's
        anchors."""
        page = ("# Title\n\nSee [a](docs/x.md#part) and ![img](pic.png \"t\"), "
                "[b](https://example.com), [multi\nline](y.md).\n\n"
                "[ref]: z.md\n<a href=\"w.md\">w</a>\n\n```\n[in code](nope.md)\n```\n"
                "`[span](nope2.md)` `spec/v1.md` `broker/iggy/` `./skerry-data` "
                "`topics/<t>/` `127.0.0.0/8` `floor(P/n)` `../shared/x.md`\n")
        assert link_targets(page) == ["docs/x.md#part", "pic.png", "https://example.com",
                                      "y.md", "z.md", "w.md"]
        assert path_spans(page) == ["spec/v1.md", "broker/iggy/", "../shared/x.md"]
        headings = ("# The V1 line protocol\n### AUTH (additive)\n"
                    "### Replication: REPLICA_FETCH, SET_PARTITION_ROLE\n"
                    "## A first session with `nc`\n## Notes\n## Notes\n"
                    "## Against the Redis targets (2026-11-22 04:57 UTC, `bench/run_all`)\n"
                    "Setext title\n===\n```\n# not a heading\n```\n")
        assert heading_anchors(headings) == {
            "the-v1-line-protocol", "auth-additive",
            "replication-replica_fetch-set_partition_role", "a-first-session-with-nc",
            "notes", "notes-1", "against-the-redis-targets-2026-11-22-0457-utc-benchrun_all",
            "setext-title"}

    def test_a_dead_link_is_reported(self) -> None:
        """A link to a missing file, to a missing heading, out of the repository, and a
        code span naming a missing repository path are each reported."""
        text = ("# Probe\n[ok](iggy.md#enabling-it) [self](#probe) [gone](nowhere.md) "
                "[anchor](iggy.md#nope) [out](../../shared/STYLE.md) `broker/iggy/` "
                "`spec/v1-protocol.md`\n")
        dead = dead_links(ROOT / "docs" / "probe.md", text)
        assert [line.split(": ", 1)[1] for line in dead] == [
            "nowhere.md (no such file)", "iggy.md#nope (no heading with that anchor)",
            "../../shared/STYLE.md (outside the repository)",
            "`spec/v1-protocol.md` (not in the repository)"]
