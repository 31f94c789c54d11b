"""A compacted topic replicated by real brokers connected in memory: a follower that was
down while the leader wrote and cleaned copies the leader's compacted log (gaps included)
through the normal fetch loop, ends where the leader ends, rejoins the ISR, and its copy
survives a restart."""

from __future__ import annotations

from pathlib import Path

from tests.replication.cluster_harness import TOPIC, Network


def _rows(net: Network, broker: int) -> list[tuple[int, bytes | None, bytes]]:
    plog = net.plog(broker)
    out = []
    at = 0
    while at < plog.next_offset:
        result = plog.read(at, 1000, 1 << 24)
        out += [(r.offset, r.key, r.payload) for r in result.records]
        if result.next_offset <= at:
            break
        at = result.next_offset
    return out


def test_follower_catches_up_from_a_compacted_leader(tmp_path: Path) -> None:
    """Broker 2 is killed; the leader takes 600 keyed messages in 4 KiB segments and
    cleans them; broker 2 restarts, copies the compacted log (its records, offsets and
    bytes are the leader's, with the gaps), rejoins the ISR at the leader's end, and reads
    the same after another restart."""
    net = Network(tmp_path, storage={"segment_bytes": 4096}, start=False)
    for node in net.nodes.values():
        node.config["topics"][TOPIC]["cleanup_policy"] = "compact"
    for i in net.nodes:
        net.start(i)
    net.run_until(lambda: net.confirmed_leader(0), within=5)
    client = net.client(0)
    client.send(f"PRODUCE|{TOPIC} early:first acks=all partition=0")
    net.advance(0.3)
    net.crash(2)
    net.run_until(lambda: net.status(0).isr == [0, 1], within=5)
    for i in range(600):
        client.send(f"PRODUCE|{TOPIC} k{i % 7}:v{i} acks=all partition=0")
        if i % 20 == 19:
            net.advance(0.05)  # one turn's messages are one batch, never split by a roll
    net.advance(0.5)
    cleaned: list[int] = []
    net.broker(0).core.clean_now().addCallback(cleaned.append)
    net.run_until(lambda: bool(cleaned), within=5)
    assert cleaned == [1]
    leader = _rows(net, 0)
    offsets = [o for o, _k, _v in leader]
    assert len(leader) < 200 and offsets[0] == 0 and offsets[1] > 1  # compacted, with gaps
    net.start(2)
    net.run_until(lambda: net.status(0).isr == [0, 1, 2], within=10)
    assert net.plog(2).next_offset == net.plog(0).next_offset == 601
    copy = _rows(net, 2)
    # Broker 2 copied the leader's compacted region and then the uncleaned tail: the
    # leader's records are all there, at the same offsets.
    assert set(leader) <= set(copy)
    assert {k: v for _o, k, v in copy} == {k: v for _o, k, v in leader}
    net.crash(2)
    net.start(2)
    assert _rows(net, 2) == copy
