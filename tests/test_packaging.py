"""The source distribution builds the compiled loops: every header a C source includes
with quotes is in the sdist. The extensions are optional (setup.py), so a missing header
would not fail an install from the sdist: it would silently install the pure-Python twins
only, several times slower."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support import ROOT


@pytest.mark.slow
def test_the_sdist_holds_every_header_the_c_sources_include(tmp_path: Path) -> None:
    # Built from a copy of the checkout's files: an egg-info left in the checkout by an
    # earlier build would add the files it listed then.
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    tree = tmp_path / "tree"
    for name in listed:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    done = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)],
                          cwd=tree, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    sources = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("*/**/_c*.c")
                     if ".venv" not in p.parts and "build" not in p.parts)
    assert "broker/kafka/_cfetch.c" in sources and "data/_cspeedups.c" in sources
    missing = []
    for source in sources:
        assert source in names, f"{source} is not in the sdist"
        for header in re.findall(r'^#include "([^"]+)"', (ROOT / source).read_text(), re.M):
            here = (Path(source).parent / header).as_posix()
            if here not in names and f"data/{header}" not in names:
                missing.append(f"{source}: {header}")
    assert missing == []
