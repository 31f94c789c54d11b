"""A compacted topic through V1, Iggy and TANK on a real broker process (the cleaner runs
every 100 ms): every reader crosses the gaps compaction leaves and shows each surviving
record at the offset it was written at, a reader at a removed offset gets the next record,
and a message without a key is refused in V1's words (BAD_REQUEST)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from broker.tank import client as tc
from tests.iggy.harness import RawClient, iggy_port_of
from tests.iggy.test_cross_protocol import poll, v1_detail
from tests.support import BrokerProcess, V1Client
from tests.tank.harness import tank_port_of


@pytest.fixture(scope="module")
def compacted() -> Iterator[tuple[BrokerProcess, int, int, list[tuple[int, str, str]]]]:
    """A broker with topic ``cc`` compacted: 80 messages, one key written only once early
    (so the survivors are not contiguous); yields the broker, its TANK and Iggy ports and the survivors
    ``(offset, key, value)`` as V1 CONSUME detail=true shows them."""
    import tempfile
    from pathlib import Path

    proc = BrokerProcess(Path(tempfile.mkdtemp(prefix="compaction-transports-")), {
        "tank_port": 0, "iggy_port": 0,
        "storage": {"fsync": "never", "cleaner_interval_ms": 100}})
    with proc:
        text = proc.log_text()
        v1 = V1Client(proc.port)
        assert v1.request("V1|1|ADMIN_CREATE_TOPIC|cc 1 1 cleanup_policy=compact "
                          "segment_bytes=1000").startswith("V1|1|OK")
        for i in range(80):
            key = "early" if i == 5 else "hot" if i % 4 == 0 else f"k{i % 3}"
            assert v1.request(f"V1|2|PRODUCE|cc {key}:v{i} partition=0").startswith("V1|2|OK")
        # Wait for the cleaner to finish: fewer records, and the same for a second (a
        # pass may run while the messages are still arriving, the next one cleans more).
        deadline = time.monotonic() + 30
        before: list = []
        while True:
            rows = v1_detail(v1, "cc", 0, 0)
            if (len(rows) < 40 and rows == before) or time.monotonic() > deadline:
                break
            before = rows
            time.sleep(1.0)
        assert len(rows) < 40 and rows == before, f"not compacted: {len(rows)} records"
        survivors = [(off, key.decode(), value.decode()) for off, _ts, key, value in rows]
        yield proc, tank_port_of(text), iggy_port_of(text), survivors


def _gaps(offsets: list[int]) -> bool:
    return offsets != list(range(offsets[0], offsets[0] + len(offsets)))


def test_v1_consume_shows_each_record_at_its_offset(compacted) -> None:  # noqa: ANN001
    """Plain CONSUME lists the survivors with their own offsets (not renumbered), the
    latest value of every key is there, and CONSUME at a removed offset starts at the
    next survivor."""
    proc, _tank, _iggy, survivors = compacted
    offsets = [off for off, _k, _v in survivors]
    assert offsets[0] > 0 and _gaps(offsets)
    v1 = V1Client(proc.port)
    line = v1.request("V1|3|CONSUME|cc 0 0 max=1000")
    match = re.fullmatch(r"V1\|3\|OK\|messages=(\S*) hw=79", line)
    assert match, line
    plain = [(int(o), v) for o, v in (item.split(":") for item in match.group(1).split(","))]
    assert plain == [(off, value) for off, _k, value in survivors]
    latest = {key: value for _off, key, value in survivors}
    assert latest == {"early": "v5", "hot": "v76", "k0": "v78", "k1": "v79", "k2": "v77"}
    removed = next(o for o in range(offsets[-1]) if o not in offsets)
    line = v1.request(f"V1|4|CONSUME|cc 0 {removed} max=1")
    assert line.startswith(f"V1|4|OK|messages={min(o for o in offsets if o > removed)}:"), line


def test_v1_refuses_a_message_without_key(compacted) -> None:  # noqa: ANN001
    """PRODUCE with an empty key to a compacted topic is BAD_REQUEST, nothing appended."""
    proc, _tank, _iggy, _survivors = compacted
    v1 = V1Client(proc.port)
    line = v1.request("V1|5|PRODUCE|cc :keyless partition=0")
    assert line.startswith("V1|5|ERR|BAD_REQUEST|topic cc is compacted"), line
    assert v1.request("V1|6|CONSUME|cc 0 80").startswith("V1|6|OK|messages= ")


def test_iggy_poll_crosses_the_gaps(compacted) -> None:  # noqa: ANN001
    """PollMessages by offset returns the survivors, each with its stored offset."""
    _proc, _tank, iggy_port, survivors = compacted
    iggy = RawClient(iggy_port)
    iggy.login()
    records = poll(iggy, "default", "cc", 0, 0)
    assert [(r["offset"], r["payload"].decode()) for r in records] == [
        (off, value) for off, _k, value in survivors]


def test_tank_consume_numbers_messages_by_their_offsets(compacted) -> None:  # noqa: ANN001
    """TANK chunks are gap-free runs: a consume from seq 1 starts at the first survivor
    (seq = offset + 1), and consuming on from each chunk's end reaches every survivor."""
    _proc, tank_port, _iggy, survivors = compacted
    got: list[tuple[int, str]] = []
    seq = 1
    with tc.TankClient("127.0.0.1", tank_port) as tank:
        for _ in range(len(survivors) + 5):
            messages = tank.consume([(b"cc", 0, seq, 1 << 16)]).data[0].messages
            if not messages:
                break
            got += [(m.seq - 1, m.content.decode()) for m in messages]
            seq = messages[-1].seq + 1
    assert got == [(off, value) for off, _k, value in survivors]


def test_iggy_refuses_a_message_without_key(compacted) -> None:  # noqa: ANN001
    """SendMessages to a compacted topic with one message lacking the key header answers
    INVALID_COMMAND and appends none of the batch."""
    import struct

    from broker.iggy import codec
    from broker.iggy.codec import Identifier, PartitioningKind
    from broker.iggy.errors import Status
    from tests.iggy.test_cross_protocol import key_header

    proc, _tank, iggy_port, survivors = compacted
    iggy = RawClient(iggy_port)
    iggy.login()
    messages = codec.encode_messages([b"keyed", b"keyless"], [key_header(b"k0"), b""], [0, 0])
    reply = iggy.call(codec.SendMessages(Identifier("default"), Identifier("cc"),
                                         PartitioningKind.PARTITION_ID, struct.pack("<I", 0), 2,
                                         messages))
    assert struct.unpack_from("<I", reply)[0] == Status.INVALID_COMMAND
    assert v1_detail(V1Client(proc.port), "cc", 0, survivors[-1][0] + 1) == []
