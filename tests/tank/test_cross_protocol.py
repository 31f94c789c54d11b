"""Acceptance 3: one store, three transports, on a real broker process. Messages produced
over TANK are read over V1 (``CONSUME ... detail=true enc=b64``) and Iggy (PollMessages
from stream "default") with the same bytes, offsets = seq - 1 and the key as V1's key
header; messages produced over V1 are consumed over TANK at seq = offset + 1 with their
keys."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

import pytest

from broker.tank import client as tc
from tests.iggy.harness import RawClient, iggy_port_of
from tests.iggy.test_cross_protocol import key_header, poll, v1_detail
from tests.support import BrokerProcess, V1Client
from tests.tank.harness import tank_port_of

TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("tank-cross"), {
        "tank_port": 0, "iggy_port": 0, "storage": {"fsync": "never"}})
    with proc:
        text = proc.log_text()
        yield proc, tank_port_of(text), iggy_port_of(text)


def raw_key_header(key: bytes) -> bytes:
    """A non-UTF-8 key, by hand: name kind 2 "key", value kind 1 (raw)."""
    return b"\x02" + struct.pack("<I", 3) + b"key" + b"\x01" + struct.pack("<I", len(key)) + key


class CrossProtocolTests:
    def test_tank_to_v1_and_iggy(self, broker) -> None:  # noqa: ANN001
        proc, tank_port, iggy_port = broker
        msgs = [tc.Msg(b"hello", b"k1", TS), tc.Msg(b"world", b"", TS),
                tc.Msg(b"\x00binary\xff", b"k2", TS + 5)]
        snappy = [tc.Msg(b"y" * 400, b"big", TS + 7)] * 3
        with tc.TankClient("127.0.0.1", tank_port) as tank:
            assert tank.create_topic(b"cross-t", 2) is None
            for bundle in (msgs, snappy):
                assert tank.produce([(b"cross-t", 1, bundle)])[2] == []
        sent = msgs + snappy
        v1 = V1Client(proc.port)
        detail = v1_detail(v1, "cross-t", 1, 0)
        assert [(o, k, v) for o, _ts, k, v in detail] == [
            (i, m.key, m.content) for i, m in enumerate(sent)]
        iggy = RawClient(iggy_port)
        iggy.login()
        records = poll(iggy, "default", "cross-t", 1, 0)
        assert [(r["offset"], r["payload"], r["headers"], r["origin"]) for r in records] == [
            (i, m.content, key_header(m.key) if m.key else b"", m.ts * 1000)
            for i, m in enumerate(sent)]

    def test_non_utf8_key_is_a_raw_header(self, broker) -> None:  # noqa: ANN001
        """A binary TANK key travels as the key header with value kind 1 (raw): Iggy sees
        it as such, TANK reads it back."""
        _proc, tank_port, iggy_port = broker
        with tc.TankClient("127.0.0.1", tank_port) as tank:
            assert tank.create_topic(b"cross-bin", 1) is None
            assert tank.produce([(b"cross-bin", 0, [tc.Msg(b"v", b"\xff\xfe", TS)])])[2] == []
            got = tank.consume([(b"cross-bin", 0, 1, 4096)]).data[0].messages
        assert [(m.key, m.content) for m in got] == [(b"\xff\xfe", b"v")]
        iggy = RawClient(iggy_port)
        iggy.login()
        (record,) = poll(iggy, "default", "cross-bin", 0, 0)
        assert record["headers"] == raw_key_header(b"\xff\xfe")

    def test_v1_to_tank(self, broker) -> None:  # noqa: ANN001
        proc, tank_port, _iggy = broker
        v1 = V1Client(proc.port)
        assert v1.request("V1|1|ADMIN_CREATE_TOPIC|cross-v 1 1").startswith("V1|1|OK")
        offsets = []
        for i, kv in enumerate(["user1:event-0", ":event-1", "user2:event-2"]):
            line = v1.request(f"V1|{i + 2}|PRODUCE|cross-v {kv}")
            match = re.fullmatch(rf"V1\|{i + 2}\|OK\|partition=0 offset=(\d+) hw=\d+", line)
            assert match, line
            offsets.append(int(match.group(1)))
        assert offsets == [0, 1, 2]
        detail = v1_detail(v1, "cross-v", 0, 0)
        with tc.TankClient("127.0.0.1", tank_port) as tank:
            got = tank.consume([(b"cross-v", 0, 0, 4096)]).data[0]
            assert tank.discover_partitions(b"cross-v") == [tc.Discovered(0, 1, 3)]
        assert [(m.seq, m.key, m.content) for m in got.messages] == [
            (1, b"user1", b"event-0"), (2, b"", b"event-1"), (3, b"user2", b"event-2")]
        assert [m.ts for m in got.messages] == [ts for _o, ts, _k, _v in detail]
        assert got.hw == 3  # V1 hw 2, + 1
