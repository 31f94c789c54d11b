"""ADMIN_ALTER_TOPIC over the real core and store, driven in memory: the reply, the
``topic.json`` it rewrites, the retention pass that applies it, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

from tests.v1.test_protocol import Harness, lines

TOPIC_JSON = Path("data") / "topics" / "t" / "topic.json"


def request(h: Harness, line: str) -> bytes:
    proto, tr = h.connect()
    proto.dataReceived(line.encode() + b"\n")
    h.turn()
    h.thread.run_all()
    return lines(tr)[-1]


class AlterTopicTests:
    def test_retention_is_changed_kept_in_topic_json_and_applied(self, tmp_path: Path) -> None:
        """retention_bytes set on an existing topic is written to its topic.json, survives a
        restart, and the next retention pass deletes the oldest segments by it; ``none``
        removes a limit and a setting left out keeps its value."""
        h = Harness(tmp_path, storage={"segment_bytes": 4096, "fsync": "never"},
                    topics={"t": {"partitions": 1, "retention_ms": 3_600_000}})
        proto, tr = h.connect()
        for i in range(200):  # one append per turn: segments roll at 4 KiB
            proto.dataReceived(b"V1|%d|PRODUCE|t k:%s\n" % (i, b"x" * 200))
            h.turn()
        assert request(h, "V1|1|OFFSETS|t 0") == b"V1|1|OK|earliest=0 latest=200"
        assert request(h, "V1|2|ADMIN_ALTER_TOPIC|t retention_bytes=8192") == \
            b"V1|2|OK|topic=t retention_ms=3600000 retention_bytes=8192"
        config = json.loads((tmp_path / TOPIC_JSON).read_text())
        assert (config["retention_ms"], config["retention_bytes"]) == (3_600_000, 8192)
        h.clock.advance(60)  # the periodic retention pass
        earliest = int(request(h, "V1|3|OFFSETS|t 0").split(b"earliest=")[1].split()[0])
        assert earliest > 150
        assert request(h, "V1|4|ADMIN_ALTER_TOPIC|t retention_ms=none") == \
            b"V1|4|OK|topic=t retention_ms=none retention_bytes=8192"
        h.broker.stop()
        h.clock.advance(5)
        h.thread.run_all()
        again = Harness(tmp_path, storage={"segment_bytes": 4096})
        assert request(again, "V1|5|ADMIN_ALTER_TOPIC|t retention_bytes=none") == \
            b"V1|5|OK|topic=t retention_ms=none retention_bytes=none"
        config = json.loads((tmp_path / TOPIC_JSON).read_text())
        assert (config["retention_ms"], config["retention_bytes"]) == (None, None)

    def test_unknown_topics_and_bad_values_are_refused(self, tmp_path: Path) -> None:
        """An unknown topic is BAD_REQUEST `unknown topic` and creates nothing; a value
        below 1 or not a number is BAD_REQUEST and changes nothing."""
        h = Harness(tmp_path, topics={"t": {"partitions": 1}})
        assert request(h, "V1|1|ADMIN_ALTER_TOPIC|nope retention_ms=5") == \
            b"V1|1|ERR|BAD_REQUEST|unknown topic"
        assert request(h, "V1|2|METADATA|") == b"V1|2|OK|topics=[t]"
        before = (tmp_path / TOPIC_JSON).read_text()
        assert request(h, "V1|3|ADMIN_ALTER_TOPIC|t retention_ms=0").startswith(
            b"V1|3|ERR|BAD_REQUEST|retention_ms must be at least 1")
        assert (tmp_path / TOPIC_JSON).read_text() == before
