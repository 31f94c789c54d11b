"""The spec's single-broker replication scenario over TCP against the real broker process:
RF=3 and min ISR 2, REPLICA_FETCH reports standing in for the followers."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.support import BrokerProcess


def _field(reply: str, name: str) -> str:
    match = re.search(rf"(?:^|[| ]){name}=(\S*)", reply)
    assert match, (name, reply)
    return match.group(1)


def test_single_broker_replication_scenario(tmp_path: Path) -> None:
    """acks=all times out with no follower; after two REPLICA_FETCH reports it succeeds;
    CONSUME never returns an offset above hw; a follower-role partition refuses PRODUCE with
    NOT_LEADER and still serves CONSUME."""
    config = {
        "replication": {"ack_timeout_ms": 300, "replica_lag_timeout_ms": 60000},
        "topics": {"repl": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2}},
    }
    with BrokerProcess(tmp_path, config) as proc:
        c = proc.client()
        started = time.monotonic()
        assert c.request("V1|1|PRODUCE|repl k:first acks=all").startswith(
            "V1|1|ERR|REPLICATION_TIMEOUT|")
        assert time.monotonic() - started >= 0.25
        # The timed-out message stays in the log. hw is the smallest last offset over the
        # ISR, which holds only the leader so far: the message counts as committed (the spec's
        # "may still become committed"); acks=all failed on the ISR size, not on hw.
        assert c.request("V1|2|CONSUME|repl 0 0") == "V1|2|OK|messages=0:first hw=0"

        one = c.request("V1|3|REPLICA_FETCH|repl 0 1 0")
        assert one.startswith("V1|3|OK|replica=1 acked_offset=0 hw=0 isr=[0 1] ")
        assert _field(one, "under_replicated") == "true"
        two = c.request("V1|4|REPLICA_FETCH|repl 0 2 0")
        assert two == "V1|4|OK|replica=2 acked_offset=0 hw=0 isr=[0 1 2] under_replicated=false"
        assert c.request("V1|5|CONSUME|repl 0 0") == "V1|5|OK|messages=0:first hw=0"

        # acks=all succeeds once the followers report the new offset.
        c.send(b"V1|6|PRODUCE|repl k:second acks=all\n")
        other = proc.client()
        assert other.request("V1|7|REPLICA_FETCH|repl 0 1 1").startswith("V1|7|OK|replica=1 ")
        assert other.request("V1|8|REPLICA_FETCH|repl 0 2 1").startswith("V1|8|OK|replica=2 ")
        assert c.readline() == b"V1|6|OK|partition=0 offset=1 hw=1"

        # acks=1 appends without the followers: CONSUME stops at hw.
        assert c.request("V1|9|PRODUCE|repl k:third") == "V1|9|OK|partition=0 offset=2 hw=1"
        assert c.request("V1|10|CONSUME|repl 0 0") == "V1|10|OK|messages=0:first,1:second hw=1"
        assert c.request("V1|11|CONSUME|repl 0 2") == "V1|11|OK|messages= hw=1"

        # Bad replica ids are refused.
        assert c.request("V1|12|REPLICA_FETCH|repl 0 0 1").startswith("V1|12|ERR|BAD_REQUEST|")
        assert c.request("V1|13|REPLICA_FETCH|repl 0 3 1").startswith("V1|13|ERR|BAD_REQUEST|")

        # Follower role: PRODUCE gets NOT_LEADER, CONSUME still serves up to hw.
        assert c.request("V1|14|SET_PARTITION_ROLE|repl 0 follower") == \
            "V1|14|OK|topic=repl partition=0 role=follower hw=1"
        assert c.request("V1|15|PRODUCE|repl k:fourth").startswith("V1|15|ERR|NOT_LEADER|")
        assert c.request("V1|16|CONSUME|repl 0 0") == "V1|16|OK|messages=0:first,1:second hw=1"
        assert c.request("V1|17|SET_PARTITION_ROLE|repl 0 leader").startswith(
            "V1|17|OK|topic=repl partition=0 role=leader hw=")
        assert c.request("V1|18|PRODUCE|repl k:fifth").startswith("V1|18|OK|partition=0 offset=3")
