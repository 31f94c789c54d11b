"""docs/client.md runs as written: each ``python`` block, in order and in one namespace,
against a real broker on a free loopback port, prints exactly the ``text`` block after it.
The broker is the one the page's ``skerry serve`` command starts (its data directory under
the folder standing for the reader's clone, its log line as shown)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from tests.support import ROOT, BrokerProcess
from tests.test_docs_getting_started import start_page_broker, steps

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


def run_examples(broker: BrokerProcess) -> None:
    """Every example, in order, in one namespace, against ``broker``: each prints exactly
    what the page shows."""
    namespace: dict[str, object] = {"__name__": "docs_client"}
    for code, expected in examples(DOC.read_text()):
        code = code.replace("127.0.0.1:9092", f"127.0.0.1:{broker.port}")
        code = code.replace('"127.0.0.1", 9092', f'"127.0.0.1", {broker.port}')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102
        assert out.getvalue() == expected, code


def run_client_page(folder: Path) -> None:
    """The page in ``folder``: its broker, then its examples."""
    (serve,) = steps(DOC.read_text())
    assert serve.command.startswith("skerry serve --data-dir "), serve.command
    broker = start_page_broker(serve.command, serve.output, folder, "client")
    try:
        run_examples(broker)
    finally:
        broker.stop()


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
        run_client_page(tmp_path)
