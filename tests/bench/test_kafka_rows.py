"""bench/kafka_rows.py: single rows of the Apache Kafka comparison against one broker.

A real Skerry, driven by librdkafka with its fetch round trips logged (no Java needed for
the librdkafka rows; the ConsumerPerformance rows run in the full comparison's test)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")

from bench import kafka_rows  # noqa: E402


@pytest.mark.slow
def test_a_consume_row_reports_every_fetch_round_trip(capsys: pytest.CaptureFixture[str]) -> None:
    # 100,000 records: the broker's CPU for them spans several of /proc's 10 ms ticks (with
    # 5,000 it is one tick or none, and cpu_s_per_m could read 0)
    assert kafka_rows.main(["skerry", "--rows", "crd1", "--messages", "100000",
                            "--trace-fetches"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith("{")]
    assert len(lines) == 1
    row = lines[0]
    assert row["broker"] == "skerry" and row["row"] == "crd1"
    assert row["msgs_s"] > 0 and row["cpu_s_per_m"] > 0
    # every record came back in the logged responses (100-byte values and their framing)
    assert row["fetches"] == len(row["response_bytes"]) == len(row["rtt_ms"]) >= 1
    assert sum(row["response_bytes"]) > 100000 * 100
    assert all(rtt >= 0 for rtt in row["rtt_ms"])


@pytest.mark.slow
def test_a_produce_row_alone_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Only produce rows: no topic to fill first (creating none used to fail)."""
    assert kafka_rows.main(["skerry", "--rows", "prd6aall", "--messages", "100000"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith("{")]
    assert [(r["row"], r["msgs_s"] > 0) for r in lines] == [("prd6aall", True)]


@pytest.mark.slow
def test_a_setting_reaches_the_broker_and_faults_are_counted(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--set kafka.fetch_max_bytes=1048576``: every Fetch answer the client logged is at
    most 1 MiB and its framing (librdkafka asks 50 MiB); the row prints the minor page
    faults of the broker and of the client."""
    assert kafka_rows.main(["skerry", "--rows", "crd6", "--messages", "100000",
                            "--trace-fetches", "--set", "kafka.fetch_max_bytes=1048576"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith("{")]
    assert len(lines) == 1
    row = lines[0]
    assert sum(row["response_bytes"]) > 100000 * 100
    assert row["fetches"] >= 10 and max(row["response_bytes"]) <= (1 << 20) + 4096
    assert row["broker_minflt"] >= 0 and row["client_minflt"] > 0


def test_a_setting_without_a_section_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kafka_rows.main(["skerry", "--rows", "crd1", "--set", "fetch_max_bytes=1"])
    assert "--set takes section.key=value" in capsys.readouterr().err


def test_an_unknown_row_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kafka_rows.main(["skerry", "--rows", "crd2"])
    assert "unknown row 'crd2'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_cluster_row_replicates_to_three_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    """The 3-broker row (etcd, RF 3, acks=all): every broker spends CPU on it, the leader
    of each partition and the two followers copying it."""
    assert kafka_rows.main(["skerry", "--rows", "cluster", "--messages", "100000"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith("{")]
    assert len(lines) == 1
    row = lines[0]
    assert row["row"] == "cluster" and row["msgs_s"] > 0 and len(row["pids"]) == 3
    assert len(row["cpu_s_per_m_each"]) == 3 and all(c > 0 for c in row["cpu_s_per_m_each"])
    assert row["cpu_s_per_m"] == pytest.approx(sum(row["cpu_s_per_m_each"]), abs=0.01)


def test_the_cluster_row_runs_alone(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kafka_rows.main(["skerry", "--rows", "cluster,crd1"])
    assert "the cluster row runs alone" in capsys.readouterr().err


def test_producer_performance_latency_is_read_from_the_whole_runs_line() -> None:
    """The last "records sent" line (the total), not a 5-second progress line."""
    out = ("499950 records sent, 99990.0 records/sec (9.54 MB/sec), 12.5 ms avg latency, "
           "300.0 ms max latency.\n"
           "1000000 records sent, 336247.5 records/sec (32.07 MB/sec), 45.23 ms avg latency, "
           "301.00 ms max latency, 38 ms 50th, 95 ms 95th, 120 ms 99th, 150 ms 99.9th.\n")
    rate, latency = kafka_rows.producer_performance_summary(out)
    assert rate == 336247.5
    assert latency == {"latency_avg_ms": 45.23, "latency_max_ms": 301.0, "latency_p50_ms": 38.0,
                       "latency_p95_ms": 95.0, "latency_p99_ms": 120.0}
