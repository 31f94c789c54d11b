"""docs/kafka.md, "Pointing clients at Skerry", run as written against a real broker whose
configuration is the page's YAML block: the kafka-python and confluent-kafka examples run
as scripts and print their ``text`` blocks, and the kcat commands print what the page
shows.

Only ports change: the YAML's ``kafka_port: 9093`` becomes 0 (a free 127.0.0.1 port, read
back from the start-up line) and the examples' ``9093`` that port; V1 gets a free port and
the data directory is the YAML's, under a folder standing for the reader's clone
(``BrokerProcess``); tests/test_docs_in_order.py runs the page after the others."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.kafka.harness import kafka_port_of
from tests.support import ROOT, BrokerProcess, debian_tool
from tests.test_docs_getting_started import in_folder

DOC = ROOT / "docs" / "kafka.md"
DOC_PORT = "9093"
_FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    return _FENCE_RE.findall(DOC.read_text())


def example(after: str) -> tuple[str, list[str]]:
    """The ``python`` block under the heading ``after`` and the ``text`` block after it."""
    text = DOC.read_text()
    part = text[text.index(after + "\n"):]
    found = _FENCE_RE.findall(part)
    assert found[0][0] == "python" and found[1][0] == "text", [b[0] for b in found[:2]]
    return found[0][1], found[1][1].splitlines()


def start_page_broker(folder: Path) -> BrokerProcess:
    """The broker the page's YAML configures, run in ``folder``, its Kafka port free."""
    yamls = [body for info, body in blocks() if info == "yaml"]
    assert len(yamls) == 2  # the listener's, then "In a cluster"'s
    config = yaml.safe_load(yamls[0])
    assert config == {"kafka_port": int(DOC_PORT), "data_dir": "./kafka-data"}
    return BrokerProcess(folder / ".broker-kafka",
                         {**in_folder(config, folder), "kafka_port": 0}).start()


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc = start_page_broker(tmp_path_factory.mktemp("kafka-docs"))
    try:
        yield kafka_port_of(proc.log_text())
    finally:
        proc.stop()


def run_python_example(port: int, workdir: Path, heading: str) -> None:
    code, expected = example(heading)
    assert DOC_PORT in code
    script = workdir / "example.py"
    script.write_text(code.replace(DOC_PORT, str(port)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == expected, heading


HEADINGS = ["### kafka-python", "### confluent-kafka"]


def run_kafka_page(folder: Path) -> None:
    """The page in ``folder``: its broker, its Python examples, its kcat commands."""
    proc = start_page_broker(folder)
    try:
        port = kafka_port_of(proc.log_text())
        workdir = folder / ".kafka-examples"
        workdir.mkdir()
        for heading in HEADINGS:
            run_python_example(port, workdir, heading)
        run_kcat_commands(port)
    finally:
        proc.stop()


@pytest.mark.parametrize("heading", HEADINGS)
def test_python_examples_print_what_the_page_shows(port, tmp_path: Path, heading):
    run_python_example(port, tmp_path, heading)


def test_kcat_commands_print_what_the_page_shows(port):
    run_kcat_commands(port)


def run_kcat_commands(port: int) -> None:
    kcat = debian_tool("kcat", "kcat")
    consoles = [body for info, body in blocks() if info == "console"]
    assert len(consoles) == 1
    commands, expected = [], []
    for line in consoles[0].splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
        else:
            expected.append(line)
    out = []
    for command in commands:
        command = command.replace(DOC_PORT, str(port)).replace("kcat ", f"{kcat} ")
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
        out += proc.stdout.splitlines()
    assert out == expected


def test_the_cluster_section_is_a_valid_kafka_brokers_setting() -> None:
    """"In a cluster"'s YAML is what ``cluster.kafka_brokers`` accepts, for the three
    brokers of docs/cluster.md's examples."""
    from replication.cluster import ClusterConfig

    raw = yaml.safe_load([body for info, body in blocks() if info == "yaml"][1])
    cluster = ClusterConfig.from_mapping({
        "broker_id": 0, "brokers": {0: "10.0.0.1:9092", 1: "10.0.0.2:9092", 2: "10.0.0.3:9092"},
        **raw["cluster"]})
    assert {b: str(a) for b, a in cluster.kafka_brokers.items()} == {
        0: "10.0.0.1:9093", 1: "10.0.0.2:9093", 2: "10.0.0.3:9093"}
