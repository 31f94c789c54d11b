"""Debian's kcat (librdkafka 2.0.2) against a real broker's Kafka listener: produce with
keys (``-K :``) and consume from the beginning to the end (``-o beginning -e``), with the
default settings (ApiVersions) and with ``broker.version.fallback`` 0.9.0 and 0.8.2, and
gzip/snappy/lz4 produce (``-z``). kcat comes from Debian (``.ci/install-tools``);
missing, these tests skip (fail in CI)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.kafka.harness import start_kafka_broker
from tests.support import debian_tool

SETTINGS = {
    "default": [],
    "0.9.0": ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"],
    "0.8.2": ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2"],
}


@pytest.fixture(scope="module")
def kcat() -> str:
    return debian_tool("kcat", "kcat")


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, kafka_port = start_kafka_broker(tmp_path_factory.mktemp("kcat"))
    try:
        yield kafka_port
    finally:
        proc.stop()


def run(kcat: str, port: int, args: list[str], stdin: str | None = None) -> str:
    proc = subprocess.run([kcat, "-b", f"127.0.0.1:{port}", *args], input=stdin,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def produce_and_consume(kcat: str, port: int, topic: str, setting: str,
                        compression: list[str]) -> None:
    lines = [f"key-{i % 5}:value-{i}" for i in range(40)]
    run(kcat, port, ["-P", "-t", topic, "-K", ":", *compression, *SETTINGS[setting]],
        "\n".join(lines) + "\n")
    out = run(kcat, port, ["-C", "-t", topic, "-o", "beginning", "-e", "-q",
                           "-f", "%k:%s:%p:%o\\n", *SETTINGS[setting]])
    got = [line.split(":") for line in out.splitlines()]
    assert sorted(f"{k}:{v}" for k, v, _p, _o in got) == sorted(lines)
    by_partition: dict[str, list[int]] = {}
    for _k, _v, p, o in got:
        by_partition.setdefault(p, []).append(int(o))
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_produce_with_keys_then_consume_from_beginning(kcat, port, setting):
    produce_and_consume(kcat, port, f"kcat-{setting.replace('.', '-')}", setting, [])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_compressed_produce(kcat, port, codec):
    produce_and_consume(kcat, port, f"kcat-{codec}", "0.9.0", ["-z", codec])
