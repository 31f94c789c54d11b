"""One core, two transports, on a real broker process: messages produced over V1 are
polled over Iggy from stream "default", and messages sent over Iggy are consumed over V1
(``detail=true enc=b64``), with the same offsets and the same bytes; a V1 group's commits
are that Iggy consumer group's stored offsets."""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Iterator

import pytest
import xxhash

from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier, PartitioningKind, PollingKind
from tests.iggy.harness import RawClient, iggy_port_of, run_isolated
from tests.support import BrokerProcess, V1Client


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("iggy-cross"), {"iggy_port": 0})
    with proc:
        yield proc, iggy_port_of(proc.log_text())


def key_header(key: bytes) -> bytes:
    """The V1 key as a user header, by hand: key kind 2 "key", value kind 2 <key>."""
    return b"\x02" + struct.pack("<I", 3) + b"key" + b"\x02" + struct.pack("<I", len(key)) + key


def parse_records(body: bytes) -> list[dict]:
    """The messages of a PolledMessages payload, field by field (layout by hand)."""
    out = []
    pos = 16
    while pos < len(body):
        ck, lo, hi, off, ts, ots, uhl, pl, rsv = struct.unpack_from("<QQQQQQIIQ", body, pos)
        end = pos + 64 + pl + uhl
        assert ck == xxhash.xxh3_64_intdigest(body[pos + 8:end])
        out.append({"offset": off, "timestamp": ts, "id": lo | hi << 64, "origin": ots,
                    "payload": body[pos + 64:pos + 64 + pl], "headers": body[pos + 64 + pl:end],
                    "raw": body[pos:end]})
        pos = end
    return out


def poll(raw: RawClient, stream: str, topic: str, partition: int, offset: int,
         count: int = 100) -> list[dict]:
    reply = raw.call(codec.PollMessages(Consumer(ConsumerKind.CONSUMER, Identifier(1)),
                                        Identifier(stream), Identifier(topic), partition,
                                        PollingKind.OFFSET, offset, count, False))
    status, length = struct.unpack_from("<II", reply)
    assert status == 0
    return parse_records(reply[8:])


def v1_detail(v1: V1Client, topic: str, partition: int, offset: int) -> list[tuple]:
    line = v1.request(f"V1|9|CONSUME|{topic} {partition} {offset} detail=true enc=b64")
    match = re.fullmatch(r"V1\|9\|OK\|messages=(\S*) hw=(-?\d+)", line)
    assert match, line
    out = []
    for item in filter(None, match.group(1).split(",")):
        off, ts_ms, key, value = item.split(":")
        out.append((int(off), int(ts_ms), base64.b64decode(key), base64.b64decode(value)))
    return out


class CrossProtocolTests:
    def test_produced_over_v1_polled_over_iggy(self, broker):
        """V1 PRODUCE k:v lands in topic "orders" of stream "default": an Iggy poll of
        that partition returns the same offsets, the value as payload and the key as the
        user header key=<k> (kind 2), with a valid checksum; V1's detailed CONSUME agrees
        on offsets and timestamps."""
        _proc, port = broker
        v1 = V1Client(_proc.port)
        placed = []
        for i in range(4):
            line = v1.request(f"V1|{i}|PRODUCE|orders user1:event-{i}")
            match = re.fullmatch(rf"V1\|{i}\|OK\|partition=(\d+) offset=(\d+) hw=\d+", line)
            assert match, line
            placed.append((int(match.group(1)), int(match.group(2))))
        partition = placed[0][0]
        assert placed == [(partition, i) for i in range(4)]
        raw = RawClient(port)
        raw.login()
        records = poll(raw, "default", "orders", partition, 0)
        assert [(r["offset"], r["payload"], r["headers"]) for r in records] == \
            [(i, f"event-{i}".encode(), key_header(b"user1")) for i in range(4)]
        detail = v1_detail(v1, "orders", partition, 0)
        assert [(o, k, v) for o, _ts, k, v in detail] == \
            [(r["offset"], b"user1", r["payload"]) for r in records]
        assert [ts for _o, ts, _k, _v in detail] == [r["timestamp"] // 1000 for r in records]
        assert poll(raw, "default", "orders", partition, 2, 1)[0]["raw"] == records[2]["raw"]

        from apache_iggy import IggyClient, PollingStrategy

        async def real() -> list[tuple[int, bytes]]:
            client = IggyClient(f"127.0.0.1:{port}")
            await client.connect()
            await client.login_user("iggy", "iggy")
            got = await client.poll_messages("default", "orders", partition,
                                             PollingStrategy.Offset(0), 10, False)
            return [(m.offset(), m.payload()) for m in got]

        assert run_isolated(real) == [(i, f"event-{i}".encode()) for i in range(4)]

    def test_sent_over_iggy_consumed_over_v1(self, broker):
        """Messages sent over Iggy to stream "default" are consumed over V1 with the same
        offsets and bytes: binary payloads (enc=b64), the key from the key=<k> user header
        even among other headers, timestamps in milliseconds."""
        proc, port = broker
        v1 = V1Client(proc.port)
        assert v1.request("V1|1|ADMIN_CREATE_TOPIC|ledger 2 1").startswith("V1|1|OK")
        raw = RawClient(port)
        raw.login()
        extra = b"\x01" + struct.pack("<I", 5) + b"trace" + b"\x01" + struct.pack("<I", 2) + b"\x00\x01"
        payloads = [b"plain", b"with space, comma|pipe", bytes(range(256)), b"\xff\xfe"]
        headers = [key_header(b"acct-1"), extra + key_header(b"acct-2"), b"", key_header(b"k:x")]
        messages = codec.encode_messages(payloads, headers, [11, 12, 13, 14])
        send = codec.SendMessages(Identifier("default"), Identifier("ledger"),
                                  PartitioningKind.PARTITION_ID, struct.pack("<I", 1), 4, messages)
        assert raw.call(send) == b"\x00" * 8
        records = poll(raw, "default", "ledger", 1, 0)
        assert [r["offset"] for r in records] == [0, 1, 2, 3]
        assert [(r["payload"], r["headers"], r["id"]) for r in records] == \
            list(zip(payloads, headers, [11, 12, 13, 14], strict=True))
        detail = v1_detail(v1, "ledger", 1, 0)
        assert detail == [(r["offset"], r["timestamp"] // 1000, key, r["payload"])
                          for r, key in zip(records, [b"acct-1", b"acct-2", b"", b"k:x"],
                                            strict=True)]

    def test_v1_group_commits_are_iggy_group_offsets(self, broker):
        """A V1 group's committed offset (next to read) on a V1 topic is the stored offset
        (last consumed) of the Iggy consumer group of the same name, and Iggy stores show
        up in V1 OFFSET."""
        proc, port = broker
        v1 = V1Client(proc.port)
        v1.request("V1|1|ADMIN_CREATE_TOPIC|audit 1 1")
        for i in range(5):
            v1.request(f"V1|{i}|PRODUCE|audit k:v{i}")
        joined = v1.request("V1|7|JOIN|auditors audit c1")
        generation = re.search(r"generation=(\d+)", joined).group(1)
        assert v1.request(f"V1|8|COMMIT|auditors audit c1 {generation} 0 3") == \
            "V1|8|OK|committed=true"
        raw = RawClient(port)
        raw.login()
        group = Consumer(ConsumerKind.CONSUMER_GROUP, Identifier("auditors"))
        target = (group, Identifier("default"), Identifier("audit"), 0)
        assert raw.call(codec.GetConsumerOffset(*target)) == struct.pack("<IIIQQ", 0, 20, 0, 4, 2)
        assert v1.request(f"V1|9|LEAVE|auditors audit c1 {generation}") == "V1|9|OK|left=true"
        assert raw.call(codec.StoreConsumerOffset(*target, 4)) == b"\x00" * 8
        assert v1.request("V1|10|OFFSET|auditors audit 0") == "V1|10|OK|offset=5"
