"""``skerry cluster status`` and ``skerry cluster elect``: a cluster seen and steered over V1.

Owns: gathering a cluster's state from its brokers (``METADATA`` for the address book,
controller and leaders, ``PING`` for who is up, ``REPLICA_STATUS`` on each partition's
leader for its replicas and ISR) into one report (a table or JSON), and the forced
election: choosing a broker when none is given (the first replica in list order that is up
and in the ISR, Kafka's preferred leader) and sending ``ADMIN_SET_PARTITION_LEADER`` to it
(without etcd the named broker carries it out; with etcd any broker would do).

Must not import: Twisted or the broker's server side; it is a client of the brokers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.cli.table import render_table
from broker.client.aio import Address, Connection, Reply, ToolError, parse_address
from broker.client.codec import parse_brokers, payload_fields

__all__ = ["ClusterReport", "PartitionRow", "gather", "render", "elect"]


@dataclass
class PartitionRow:
    topic: str
    partition: int
    leader: int
    epoch: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    hw: int | None = None

    @property
    def under_replicated(self) -> bool:
        return self.leader < 0 or len(self.isr) < len(self.replicas)


@dataclass
class ClusterReport:
    brokers: dict[int, str]
    up: dict[int, bool]
    controller: int | None
    mode: str
    """``etcd`` (a controller answers), ``operator`` (a cluster without etcd) or
    ``single`` (one broker, no cluster section)."""
    partitions: list[PartitionRow]

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "controller": self.controller,
            "brokers": [{"id": b, "address": a, "up": self.up.get(b, False)}
                        for b, a in sorted(self.brokers.items())],
            "partitions": [{"topic": r.topic, "partition": r.partition, "leader": r.leader,
                            "epoch": r.epoch, "replicas": r.replicas, "isr": r.isr,
                            "under_replicated": r.under_replicated}
                           for r in self.partitions],
            "under_replicated": sum(r.under_replicated for r in self.partitions),
        }


def _with_auth(base: Address, text: str) -> Address:
    found = parse_address(text)
    return Address(found.host, found.port, base.user, base.token, base.tls)


async def _open(address: Address, timeout: float) -> Connection | None:
    try:
        return await Connection.open(address, timeout)
    except ToolError:
        return None


async def gather(bootstrap: Address, timeout: float) -> ClusterReport:
    """Ask the bootstrap broker for the address book and topics, every broker whether it
    is up, and each partition's leader for its replicas and ISR."""
    first = await Connection.open(bootstrap, timeout)
    conns: dict[int, Connection | None] = {}
    try:
        listing = await first.request("METADATA")
        brokers = parse_brokers(listing)
        fields = payload_fields(listing.payload)
        topics = listing.items("topics")
        if not brokers:
            rows = []
            for topic in topics:
                meta = await first.request("METADATA", topic)
                for p, role in enumerate(meta.items("roles")):
                    status = await first.request("REPLICA_STATUS", f"{topic} {p}")
                    rows.append(PartitionRow(topic, p, 0 if role == "leader" else -1,
                                             status.number("epoch"), [0], [0]))
            return ClusterReport({0: str(bootstrap)}, {0: True}, None, "single", rows)
        controller = None
        if "controller" in fields:
            controller = int(fields["controller"])
            controller = None if controller < 0 else controller
        for broker, text in brokers.items():
            conns[broker] = await _open(_with_auth(bootstrap, text), min(timeout, 3.0))
        up = {b: c is not None for b, c in conns.items()}
        rows = []
        for topic in topics:
            meta = await first.request("METADATA", topic)
            leaders = meta.ints("leaders") if meta.has("leaders") else []
            epochs = meta.ints("epochs") if meta.has("epochs") else []
            for p in range(meta.number("partitions")):
                leader = leaders[p] if p < len(leaders) else -1
                row = PartitionRow(topic, p, leader, epochs[p] if p < len(epochs) else -1)
                source = conns.get(leader) if leader >= 0 else None
                status = await _status(source, topic, p) if source is not None else None
                if status is None:  # the leader is unknown or down: any live replica's view
                    for conn in conns.values():
                        status = await _status(conn, topic, p) if conn is not None else None
                        if status is not None:
                            break
                if status is not None:
                    row.replicas = status.ints("replicas")
                    row.isr = [row.replicas[i] for i in status.ints("isr")
                               if i < len(row.replicas)]
                    row.hw = status.number("hw")
                    if leader >= 0 and not up.get(leader, False):
                        row.isr = [b for b in row.isr if b != leader]
                        row.leader = -1
                rows.append(row)
        mode = "etcd" if "controller" in fields else "operator"
        return ClusterReport(brokers, up, controller, mode, rows)
    finally:
        await first.close()
        for conn in conns.values():
            if conn is not None:
                await conn.close()


async def _status(conn: Connection, topic: str, partition: int) -> Reply | None:
    try:
        reply = await conn.request("REPLICA_STATUS", f"{topic} {partition}", check=False)
    except ToolError:
        return None
    return reply if reply.ok else None


def render(report: ClusterReport) -> str:
    """The report as the terminal shows it."""
    up = [b for b in sorted(report.brokers) if report.up.get(b)]
    down = [b for b in sorted(report.brokers) if not report.up.get(b)]
    if report.mode == "etcd":
        control = f"controller: broker {report.controller}" if report.controller is not None \
            else "controller: none right now"
    elif report.mode == "operator":
        control = "controller: none (operator mode: no etcd; failover with `skerry cluster elect`)"
    else:
        control = "a single broker (no cluster section)"
    under = sum(r.under_replicated for r in report.partitions)
    # "down: broker 2" (not "down: 2", which reads as a count); "down: brokers 1, 2"
    named = (f", down: broker{'s' if len(down) > 1 else ''} {', '.join(map(str, down))}"
             if down else "")
    head = (f"brokers: {len(report.brokers)} ({len(up)} up{named}); {control}; "
            f"under-replicated partitions: {under}\n")
    brokers = render_table(["broker", "address", "state"],
                           [[b, a, "up" if report.up.get(b) else "down"]
                            for b, a in sorted(report.brokers.items())])
    partitions = render_table(
        ["topic", "partition", "leader", "epoch", "replicas", "isr", "under-replicated"],
        [[r.topic, r.partition, r.leader if r.leader >= 0 else "none", r.epoch,
          r.replicas, r.isr, r.under_replicated] for r in report.partitions],
        right=("partition", "leader", "epoch"))  # numbers, "none" included
    return head + "\n" + brokers + "\n" + partitions


async def elect(bootstrap: Address, timeout: float, topic: str, partition: int,
                broker: int | None) -> str:
    """Force ``broker`` (or the preferred live in-sync replica) to lead the partition;
    returns the line to print. ``ToolError`` when no broker qualifies or the broker
    refuses (its message says why)."""
    report = await gather(bootstrap, timeout)
    if report.mode == "single":
        raise ToolError("this broker is not part of a cluster: there is no leader to elect", 2)
    row = next((r for r in report.partitions if r.topic == topic and r.partition == partition),
               None)
    if row is None:
        raise ToolError(f"unknown partition {topic}/{partition}", 2)
    live_isr = [b for b in row.isr if report.up.get(b)]
    if broker is None:
        candidates = [b for b in row.replicas if b in live_isr]
        if not candidates:
            raise ToolError(f"{topic}/{partition}: no replica is both up and in the ISR "
                            f"{row.isr}; name one with --broker (it may lack committed "
                            "messages, and the broker refuses unless unclean election is on)")
        broker = candidates[0]
        if broker == row.leader:
            return f"{topic}/{partition}: broker {broker} leads already (epoch {row.epoch})"
    if broker not in report.brokers:
        raise ToolError(f"unknown broker {broker}", 2)
    isr = [broker, *(b for b in live_isr if b != broker)]
    target = report.brokers[broker] if report.up.get(broker) else None
    if target is None:
        raise ToolError(f"broker {broker} is down")
    conn = await Connection.open(_with_auth(bootstrap, target), timeout)
    try:
        reply = await conn.request("ADMIN_SET_PARTITION_LEADER",
                                   f"{topic} {partition} {broker} {','.join(map(str, isr))}")
    finally:
        await conn.close()
    fields = payload_fields(reply.payload)
    return (f"{topic}/{partition}: broker {broker} leads now (isr {fields.get('isr')}, "
            f"term {fields.get('term')}, index {fields.get('index')})")
