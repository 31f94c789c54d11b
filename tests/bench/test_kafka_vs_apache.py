"""bench/kafka_vs_apache.py: the Skerry-against-Apache-Kafka table.

The end-to-end run starts a real Apache Kafka 4.3.1 (from ~/.m2) and a real Skerry and
drives both with librdkafka and Kafka's own tools, with tiny counts; the doc rewrite is
checked on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from bench import kafka_vs_apache as bench  # noqa: E402
from bench.report import MarkerError  # noqa: E402
from tests.support import debian_tool  # noqa: E402


def _java_and_maven() -> None:
    """Java 17 and Maven, looked up: a skip with the reason locally, a failure in CI
    (``tests.support.debian_tool``; ``.ci/install-tools`` installs them)."""
    debian_tool("java", "openjdk-17-jdk-headless")
    debian_tool("mvn", "maven")


@pytest.mark.slow
def test_a_tiny_run_fills_every_row_for_both_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    _java_and_maven()
    assert bench.main(["--rounds", "1", "--messages", "3000", "--latency-seconds", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "Skerry/Kafka" not in line]
    names = [row.split(" | ")[0][2:] for row in rows]
    for expected in ("produce 1p acks=1, librdkafka", "produce 6p acks=all, ProducerPerformance",
                     "consume 6p, librdkafka", "consume 1p, ConsumerPerformance",
                     "end-to-end p99.9 at 20k msgs/s, ms", "broker peak RSS, MB"):
        assert expected in names, names
    for row in rows:
        cells = row.split(" | ")
        # both brokers measured, and a numeric ratio between them
        assert cells[1] != "-" and cells[2] != "-", row
        assert re.fullmatch(r"\d+\.\d\d\d?", cells[3]), row


def test_write_doc_replaces_only_the_marked_table(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(f"# P\nbefore\n{bench.BEGIN}\nold table\n{bench.END}\nafter\n")
    bench.write_doc("| new | table |\n", doc)
    assert doc.read_text() == f"# P\nbefore\n{bench.BEGIN}\n| new | table |\n{bench.END}\nafter\n"


def test_write_doc_refuses_a_page_without_both_markers(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(f"# P\n{bench.BEGIN}\nno end\n")
    with pytest.raises(MarkerError):
        bench.write_doc("| x |\n", doc)
    assert doc.read_text() == f"# P\n{bench.BEGIN}\nno end\n"


def test_the_table_gives_medians_ranges_and_the_ratio() -> None:
    row = bench.Row("produce 1p acks=1, librdkafka", "msgs/s",
                    skerry=[bench.Sample(v, 10.0, 2.0) for v in (200_000, 300_000, 250_000)],
                    kafka=[bench.Sample(v, 20.0, 1.0) for v in (500_000, 400_000, 600_000)])
    table = bench.render([row], "header")
    line = [ln for ln in table.splitlines() if ln.startswith("| produce")][0]
    assert "250k (200k–300k)" in line and "500k (400k–600k)" in line
    assert "| 0.50 |" in line and "2.0 / 1.0" in line


def test_a_ratio_that_would_print_1_00_says_which_side_of_1_it_is() -> None:
    def ratio(skerry: float, kafka: float) -> str:
        row = bench.Row("produce 1p acks=all, librdkafka", "msgs/s",
                        skerry=[bench.Sample(skerry)], kafka=[bench.Sample(kafka)])
        return bench.render([row], "h").splitlines()[-1].split(" | ")[3]

    assert ratio(998_000, 1_000_000) == "0.998"
    assert ratio(1_003_000, 1_000_000) == "1.003"
    assert ratio(1_000_000, 1_000_000) == "1.00"
    assert ratio(1_170_000, 1_000_000) == "1.17"


def test_the_systems_take_turns_at_going_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 1 starts Skerry first, round 2 Kafka, round 3 Skerry again; the 3-broker pair
    of each round in the same order: neither system always runs right after the other."""
    from contextlib import contextmanager

    started: list[str] = []

    def fake(name: str):  # noqa: ANN202 - a context manager factory standing in for a broker
        @contextmanager
        def start(_workdir: Path, *_args: object):  # noqa: ANN202
            started.append(name)
            yield bench.Broker(name, None, 0)  # type: ignore[arg-type]
        return start

    monkeypatch.setattr(bench, "kafka_classpath", lambda: "")
    monkeypatch.setattr(bench, "skerry", fake("skerry"))
    monkeypatch.setattr(bench, "apache_kafka", fake("kafka"))
    monkeypatch.setattr(bench, "skerry_cluster", fake("skerry cluster"))
    monkeypatch.setattr(bench, "apache_kafka_cluster", fake("kafka cluster"))
    monkeypatch.setattr(bench, "one_round", lambda *_args: {})
    monkeypatch.setattr(bench, "cluster_round", lambda *_args: {})
    bench.run(rounds=3, messages=1, latency_s=0.0, cluster=True)
    assert started == ["skerry", "kafka", "skerry cluster", "kafka cluster",
                       "kafka", "skerry", "kafka cluster", "skerry cluster",
                       "skerry", "kafka", "skerry cluster", "kafka cluster"]


def test_a_failing_row_is_left_out_and_the_table_shows_a_dash(
        capsys: pytest.CaptureFixture[str]) -> None:
    class Dead:
        name = "kafka"

        def cpu(self) -> float:
            return 1.0

    def broken() -> tuple[float, float]:
        raise RuntimeError("ProducerPerformance failed")

    assert bench._measure(Dead(), 1000, broken) is None  # type: ignore[arg-type]
    assert "ProducerPerformance failed" in capsys.readouterr().err
    row = bench.Row("produce 1p acks=1, librdkafka", "msgs/s", skerry=[bench.Sample(1000.0)])
    line = bench.render([row], "h").splitlines()[-1]
    assert line.startswith("| produce 1p acks=1, librdkafka | 1000 | - | - |"), line


@pytest.mark.slow
def test_the_three_broker_rows_move_every_message_on_both_clusters(tmp_path: Path) -> None:
    _java_and_maven()
    from tests.control.real_etcd import etcd_binary

    etcd_binary()  # installs Debian's etcd-server, or skips with the reason
    for name, start in (("skerry", bench.skerry_cluster),
                        ("kafka", lambda w: bench.apache_kafka_cluster(w, bench.kafka_classpath()))):
        workdir = tmp_path / name
        workdir.mkdir()
        with start(workdir) as cluster:
            assert len(cluster.members) == 3
            rows = bench.cluster_round(cluster, 2000)
        # both rows measured (a failed row would be missing), and every message moved
        assert sorted(rows) == ["3 brokers RF 3 min ISR 2: consume 3p, librdkafka",
                                "3 brokers RF 3 min ISR 2: produce 3p acks=all, librdkafka"], name
        assert all(sample.value > 0 for sample in rows.values()), name


def test_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kafka-storage format -t -abc`` takes the id for an option and fails; one random
    id in 64 starts with ``-``. The bench draws again, as Kafka's ``random-uuid`` does."""
    import uuid

    draws = iter([uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=b"\x10" + bytes(15))])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    cluster = bench.cluster_id()
    assert cluster == "EAAAAAAAAAAAAAAAAAAAAA"
    assert len(cluster) == 22
