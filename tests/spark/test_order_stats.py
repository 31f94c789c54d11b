"""The example pipeline (data/pipelines/order_stats.py) on input that is not orders: a
record that is not ``<event time ms>,<amount>`` with a customer key stops it with
``MalformedOrder``, one line naming the record, and ``skerry pipeline`` prints that line
and exits 1 instead of Spark's Java traces."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from broker import cli
from broker.client.sync import Client

pytest.importorskip("pyspark")

from data.pipelines import order_stats  # noqa: E402


def _topic_with(broker: Any, topic: str, messages: list[tuple[bytes | None, bytes]]) -> None:
    """A one-partition topic holding ``messages`` (key, value) at offsets 0, 1, ..."""
    with Client(f"127.0.0.1:{broker.port}") as client:
        client.request("ADMIN_CREATE_TOPIC", f"{topic} 1 1")
        client.produce_many(topic, [(k or b"", v, 0) for k, v in messages])


class MalformedOrderTests:
    @pytest.mark.parametrize(("name", "record"), [
        ("getting-started", (b"user3", b"signed-up")),
        ("bad-amount", (b"customer1", b"1700000000000,many")),
        ("no-key", (None, b"1700000000000,5")),
        ("far-future", (b"customer1", b"99999999999999999,5")),
    ])
    def test_a_record_that_is_not_an_order_stops_with_one_line(
            self, spark: Any, broker: Any, tmp_path: Path, name: str,
            record: tuple[bytes | None, bytes]) -> None:
        """After a good order, one that is not: ``run`` raises MalformedOrder whose message
        is one line naming the topic, partition, offset and value, and writes no result."""
        topic = f"not-orders-{name}"
        now_ms = int(time.time() * 1000)
        _topic_with(broker, topic, [(b"customer0", b"%d,5" % now_ms), record])
        with pytest.raises(order_stats.MalformedOrder) as info:
            order_stats.run(f"127.0.0.1:{broker.port}", topic, f"{topic}-stats",
                            str(tmp_path / "out.parquet"), str(tmp_path / "checkpoint"),
                            spark=spark)
        message = str(info.value)
        assert "\n" not in message
        value = record[1].decode()
        assert message == (f"{topic} partition 0 offset 1 is not an order (<event time ms>,"
                           f"<amount> with a customer key): [\"{value}\"]")
        assert not (tmp_path / "out.parquet").exists()
        assert not spark.streams.active


class CommandLineTests:
    def test_malformed_order_is_one_line_and_exit_1(
            self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        """``skerry pipeline order-stats`` turns MalformedOrder into one stderr line and exit
        status 1 (no traceback)."""
        def run(*_args: Any, **_kwargs: Any) -> None:
            raise order_stats.MalformedOrder('orders partition 2 offset 0 is not an order '
                                             '(<event time ms>,<amount> with a customer key): '
                                             '["shipped"]')

        monkeypatch.setattr(order_stats, "run", run)
        monkeypatch.setattr(order_stats, "sink_ends", lambda *_args: [])  # no broker here
        assert cli.main(["pipeline", "order-stats", "--bootstrap", "127.0.0.1:1"]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1 and err.startswith(
            'skerry pipeline: orders partition 2 offset 0 is not an order '), err


class UnreachableBrokerTests:
    def test_order_stats_without_a_broker_says_so_in_one_line(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        """``skerry pipeline order-stats`` with nothing listening at ``--bootstrap`` exits 1
        with one line naming the address, before any Spark session starts."""
        import socket

        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        assert cli.main(["pipeline", "order-stats", "--bootstrap", f"127.0.0.1:{port}"]) == 1
        err = capsys.readouterr().err.splitlines()
        assert err == [f"skerry pipeline: cannot connect to the broker at 127.0.0.1:{port}: "
                       "Connection refused"]
