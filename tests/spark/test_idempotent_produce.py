"""Idempotent produce (PRODUCE pid= seq=) on a real broker: duplicates are answered with the
original offset and not appended, gaps are refused, and the state survives a restart."""

from __future__ import annotations

from pathlib import Path

from tests.support import BrokerProcess


class IdempotentProduceTests:
    def test_duplicates_dropped_across_restart(self, tmp_path: Path) -> None:
        """A resent sequence number gets the original offset and adds nothing, also after a
        restart (state rebuilt from the log) and when pipelined in one write; a gap is
        BAD_REQUEST; seq without pid is BAD_REQUEST."""
        with BrokerProcess(tmp_path) as b:
            c = b.client()
            assert c.request("V1|1|PRODUCE|t a:x partition=0 pid=p1 seq=0").endswith("offset=0 hw=0")
            assert c.request("V1|2|PRODUCE|t a:y partition=0 pid=p1 seq=1").endswith("offset=1 hw=1")
            assert c.request("V1|3|PRODUCE|t a:x partition=0 pid=p1 seq=0") == "V1|3|OK|partition=0 offset=0 hw=1"
            assert c.request("V1|4|PRODUCE|t a:z partition=0 pid=p1 seq=5").startswith("V1|4|ERR|BAD_REQUEST|out of order")
            assert c.request("V1|5|PRODUCE|t a:z partition=0 seq=5").startswith("V1|5|ERR|BAD_REQUEST|pid= and seq=")
            c.send(b"".join(b"V1|p%d|PRODUCE|t k:v%d partition=1 pid=p2 seq=%d\n" % (i, i, i % 3) for i in range(6)))
            assert [line.split(b"offset=")[1].split(b" ")[0] for line in c.readlines(6)] == [b"0", b"1", b"2"] * 2
        with BrokerProcess(tmp_path) as b:
            c = b.client()
            assert c.request("V1|6|PRODUCE|t a:y partition=0 pid=p1 seq=1") == "V1|6|OK|partition=0 offset=1 hw=1"
            assert c.request("V1|7|PRODUCE|t a:w partition=0 pid=p1 seq=2").endswith("offset=2 hw=2")
            assert c.request("V1|8|CONSUME|t 1 0") == "V1|8|OK|messages=0:v0,1:v1,2:v2 hw=2"
            fetched = c.request("V1|9|FETCH|t 0 0 max=2")
            assert fetched.startswith("V1|9|OK|hw=2 start=0 next=2 count=2 data=")
