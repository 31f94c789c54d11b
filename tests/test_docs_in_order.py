"""The pages that show sessions, followed in the order a reader meets them, in one folder
standing for the reader's clone: the README's quick start and its ``nc`` sessions, then
docs/getting-started.md, then docs/client.md, docs/operations.md, docs/iggy.md,
docs/kafka.md and docs/tank.md (in the order of the README's list of documents). Each page
starts its broker with its own ``skerry serve`` command or YAML configuration, so
whatever one page wrote into the folder stays there for the next, as on a reader's disk;
each page's replies must still be the ones it shows.

Every page's broker is stopped (SIGTERM, the reader's Ctrl-C) before the next page starts
its own, as they would share port 9092 on the reader's machine (here each takes a free
port). How each page's commands are replayed is its own test module's
(tests/test_docs_getting_started.py, tests/client/test_docs_client.py,
tests/test_docs_operations.py, tests/iggy/test_docs.py, tests/kafka/test_docs.py,
tests/tank/test_docs.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.client.test_docs_client import DOC as CLIENT_DOC
from tests.client.test_docs_client import run_client_page
from tests.iggy.test_docs import DOC as IGGY
from tests.iggy.test_docs import example as iggy_example
from tests.iggy.test_docs import run_iggy_page
from tests.kafka.test_docs import DOC as KAFKA
from tests.kafka.test_docs import blocks as kafka_blocks
from tests.kafka.test_docs import run_kafka_page
from tests.support import ROOT
from tests.tank.test_docs import DOC as TANK
from tests.tank.test_docs import example as tank_example
from tests.tank.test_docs import run_tank_page
from tests.test_docs_getting_started import (
    DOC as GETTING_STARTED,
)
from tests.test_docs_getting_started import (
    README,
    readme_serve_command,
    run_getting_started,
    run_readme,
    serve_data_dir,
    steps,
)
from tests.test_docs_operations import DOC as OPERATIONS
from tests.test_docs_operations import run_operations

READING_ORDER = [README, GETTING_STARTED, CLIENT_DOC, OPERATIONS, IGGY, KAFKA, TANK]
"""The README first; then its list of documents, in its order, keeping the pages with
sessions."""


def data_dirs() -> dict[Path, str]:
    """Each page's data directory, as the page writes it: from its ``skerry serve``
    command, or from its YAML configuration's ``data_dir``."""
    found = {README: serve_data_dir(readme_serve_command())}
    for page in (GETTING_STARTED, CLIENT_DOC, OPERATIONS):
        (serve,) = [s.command for s in steps(page.read_text()) if "skerry serve" in s.command]
        found[page] = serve_data_dir(serve)
    found[IGGY] = yaml.safe_load(iggy_example()[0])["data_dir"]
    found[KAFKA] = yaml.safe_load(next(body for info, body in kafka_blocks()
                                       if info == "yaml"))["data_dir"]
    found[TANK] = tank_example()[0]["data_dir"]
    assert list(found) == READING_ORDER
    return found


class ReadingOrderTests:
    def test_the_pages_one_after_the_other_in_one_folder(self, tmp_path: Path) -> None:
        """README, getting-started, client.md, operations.md, iggy.md, kafka.md and
        tank.md, one after the other in the same folder: every page's commands still print
        what the page shows."""
        clone = tmp_path / "clone"
        for run in (run_readme, run_getting_started, run_client_page, run_operations,
                    run_iggy_page, run_kafka_page, run_tank_page):
            run(clone)
        # the folder holds each page's data directory, side by side
        assert sorted(p.name for p in clone.iterdir() if not p.name.startswith(".")) == \
            sorted(Path(d).name for d in data_dirs().values())

    def test_every_page_with_a_session_has_a_data_directory_of_its_own(self) -> None:
        """No two pages' brokers share a data directory, so no page's replies depend on
        what the reader did on another."""
        dirs = [Path(d).as_posix() for d in data_dirs().values()]
        assert len(set(dirs)) == len(dirs), dirs

    def test_the_reading_order_is_the_readme_s(self) -> None:
        """The pages come in the order the README lists them."""
        listed = re.findall(r"^- \[docs/([\w-]+\.md)\]", README.read_text(), re.M)
        pages = [p.name for p in READING_ORDER[1:]]
        assert [name for name in listed if name in pages] == pages
        assert all((ROOT / "docs" / name).exists() for name in pages)
