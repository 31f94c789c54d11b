"""docs/client.md runs as written: each ``python`` block, in order and in one namespace,
against a real broker on a free loopback port, prints exactly the ``text`` block after it."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from tests.support import ROOT, BrokerProcess

DOC = ROOT / "docs" / "client.md"
_BLOCK_RE = re.compile(r"^```(python|text)\n(.*?)^```", re.S | re.M)


def examples(markdown: str) -> list[tuple[str, str]]:
    """``(code, expected output)`` of every python block and the text block after it."""
    blocks = _BLOCK_RE.findall(markdown)
    pairs = []
    for (kind, code), (next_kind, output) in zip(blocks[::2], blocks[1::2], strict=True):
        assert (kind, next_kind) == ("python", "text"), f"unpaired block: {code[:80]!r}"
        pairs.append((code, output))
    return pairs


class DocsClientTests:

    def test_every_example_is_paired_with_its_output(self) -> None:
        """Each python block is followed by the output it must print, and the page has
        the sections the public API promises."""
        text = DOC.read_text()
        assert len(examples(text)) >= 8
        for heading in ("## Connect", "## Produce", "## Consume and long poll",
                        "## A group member", "## Errors", "## Admin", "## asyncio"):
            assert heading in text

    def test_examples_run_against_a_real_broker(self, tmp_path: Path) -> None:
        """Every example runs, in order, and prints exactly what the page shows."""
        pairs = examples(DOC.read_text())
        with BrokerProcess(tmp_path) as broker:
            namespace: dict[str, object] = {"__name__": "docs_client"}
            for code, expected in pairs:
                code = code.replace("127.0.0.1:9092", f"127.0.0.1:{broker.port}")
                code = code.replace('"127.0.0.1", 9092', f'"127.0.0.1", {broker.port}')
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102
                assert out.getvalue() == expected, code
