"""The metrics registry of one broker: ``BrokerMetrics`` (what the hot paths feed) and the
collector that reads everything else at scrape time (the package docstring).

Must not import: the store, groups or replication modules directly, ``broker.v1.protocol``,
Twisted's web.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.process_collector import ProcessCollector
from twisted.internet.interfaces import IReactorTime

from broker.errors import SkerryError
from broker.metrics.health import Health
from broker.transport.slots import CMD, REPLY, T0, WEIGHT
from data import speedups
from data.format import HEADER_SIZE
from data.names import INTERNAL_PREFIX

if TYPE_CHECKING:
    from broker.core import BrokerCore


class GroupsView(Protocol):
    """What the metrics read of the group service."""

    def list_groups(self) -> list[tuple[str, str]]: ...

    def describe(self, group: str, topic: str) -> Any: ...


class ReplicationStatusView(Protocol):
    """What the metrics read of the replication service."""

    def describe(self, topic: str, partition: int) -> Any: ...


log = logging.getLogger("skerry.metrics")


REQUEST_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Request latency buckets, seconds: from 100 µs (a pipelined PING) to long polls."""


FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                 0.25, 0.5, 1.0, 2.5)


class _Histogram:
    """Cumulative-at-scrape histogram for the reactor thread only: no locks, weighted."""

    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float, weight: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += weight
        self.total += value * weight
        self.count += weight

    def buckets(self) -> list[tuple[str, float]]:
        out = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return out


class BrokerMetrics:
    """What the broker counts, and the registry Prometheus reads it from.

    ``clock`` times requests; ``bind`` gives the collector the objects it reads at scrape
    time. Every method is for the reactor thread except ``timed_fsync``'s wrapper.
    """

    def __init__(self, clock: IReactorTime, health: Health | None = None) -> None:
        self.now: Callable[[], float] = clock.seconds
        self.health = health or Health()
        self.broker_id = 0
        """This broker's id (a cluster's ``broker_id``): the value of
        ``skerry_group_coordinator`` for the groups it coordinates."""
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.messages_out: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.latency: dict[str, _Histogram] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self.fsync_seconds = Histogram(
            "skerry_fsync_seconds", "Time of one fsync of a partition log by the group "
            "committer (one fsync covers every append waiting at that moment).",
            buckets=FSYNC_BUCKETS, registry=self.registry)
        self.authorization_refusals = Counter(
            "skerry_authorization_refusals", "Requests an ACL refused (docs/security.md), "
            "by operation and resource type; each is also logged once per connection.",
            ["operation", "resource_type"], registry=self.registry)
        self._core: BrokerCore | None = None
        self._groups: GroupsView | None = None
        self._replication: ReplicationStatusView | None = None
        self._factory: Any = None
        self.transports: dict[str, tuple[Any, dict[str, int]]] = {"v1": (None, self.requests)}
        """Transport -> (its connection factory, its requests per command): what
        ``skerry_connections`` and ``skerry_requests_total`` show per transport (V1's
        counts are ``requests``; the others' are their dispatch boundary's)."""
        self.control: Any = None
        """``broker.services.control.ControlPlane`` with ``cluster.etcd`` (its election
        counters are exported), None otherwise."""
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)

    def bind(self, core: BrokerCore, factory: Any, groups: GroupsView | None = None,
             replication: ReplicationStatusView | None = None) -> None:
        """Read topics and partitions (``core``), connections (``factory``), groups
        (``groups``) and replica state (``replication``) at scrape time."""
        self._core = core
        self._groups = groups
        self._replication = replication
        self._factory = factory
        self.transports["v1"] = (factory, self.requests)

    def add_transport(self, name: str, factory: Any, counts: dict[str, int]) -> None:
        """Show ``name``'s connections (``factory.connections``) and requests per command
        (``counts``, its dispatch boundary's, ``broker.transport.boundary``)."""
        self.transports[name] = (factory, counts)

    # --------------------------------------------------------------- hot paths

    def produced(self, topic: str, count: int, nbytes: int) -> None:
        """``count`` messages appended to ``topic`` (one call per batch). The broker's own
        topics (``__skerry_groups``) are not user traffic and are not counted."""
        if topic.startswith(INTERNAL_PREFIX):
            return
        self.messages_in[topic] = self.messages_in.get(topic, 0) + count
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + nbytes

    def appended(self, topic: str, payloads: Sequence[bytes],
                 headers: Sequence[bytes] | None) -> None:
        """One batch appended to a partition of ``topic``: its messages and stored bytes
        (the fixed header, the user headers holding the key, and the value)."""
        count = len(payloads)
        nbytes = HEADER_SIZE * count + sum(map(len, payloads))
        if headers:
            nbytes += sum(map(len, headers))
        self.produced(topic, count, nbytes)

    def consumed(self, topic: str, count: int, nbytes: int) -> None:
        """``count`` messages read from ``topic`` for a client (one call per read)."""
        self.messages_out[topic] = self.messages_out.get(topic, 0) + count
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + nbytes

    def received(self, command: str, slot: list[Any]) -> None:
        """Count a request and stamp its reply slot ``[reply, cid]`` with the arrival time,
        a weight and the command: ``[reply, cid, t0, 1, command]``."""
        self.requests[command] = self.requests.get(command, 0) + 1
        slot += (self.now(), 1, command)  # at T0, WEIGHT, CMD (broker.transport.slots)

    def fast_produced(self, count: int, last_slot: list[Any], started: float) -> None:
        """``count`` PRODUCE lines of one read took the fast path; ``last_slot`` is the
        last one's reply slot. Its latency stands for all of them (they are answered
        together, in order, and it is answered last)."""
        self.requests["PRODUCE"] = self.requests.get("PRODUCE", 0) + count
        if last_slot[REPLY] is None:
            last_slot += (started, count, "PRODUCE")  # T0, WEIGHT, CMD
        else:
            self._observe("PRODUCE", self.now() - started, count)

    def count(self, command: str, n: int) -> None:
        """``n`` requests of ``command`` arrived (the V1 read lane counts a group at once)."""
        self.requests[command] = self.requests.get(command, 0) + n

    def timed(self, command: str, started: float, weight: int) -> None:
        """``weight`` requests of ``command`` read at ``started`` (or later) are answered
        now: one observation of their latency (the V1 read lane's answers)."""
        self._observe(command, self.now() - started, weight)

    def answered(self, slot: list[Any]) -> None:
        """The reply of a stamped slot was queued for the socket."""
        self._observe(slot[CMD], self.now() - slot[T0], slot[WEIGHT])

    def refused(self, operation: str, resource_type: str) -> None:
        """An ACL refused a request (``broker.core.access.AccessGate``)."""
        self.authorization_refusals.labels(operation, resource_type).inc()

    def invalid(self) -> None:
        """A line the codec refused (malformed envelope, unknown command, bad arguments)."""
        self.requests["INVALID"] = self.requests.get("INVALID", 0) + 1

    def _observe(self, command: str, seconds: float, weight: int) -> None:
        histogram = self.latency.get(command)
        if histogram is None:
            histogram = self.latency[command] = _Histogram(REQUEST_BUCKETS)
        histogram.observe(seconds, weight)

    def timed_fsync(self, sync: Callable[[], Any]) -> Callable[[], Any]:
        """Wrap a partition's ``sync`` so the thread that runs it records its duration."""
        histogram = self.fsync_seconds

        def timed() -> Any:
            started = time.perf_counter()
            try:
                return sync()
            finally:
                histogram.observe(time.perf_counter() - started)

        return timed

    # --------------------------------------------------------------- exposition

    def render(self) -> bytes:
        """The Prometheus text exposition of everything above (reactor thread)."""
        return generate_latest(self.registry)


class _Collector:
    """Families built from ``BrokerMetrics`` counters and, at scrape time, broker state."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.m = metrics

    def describe(self) -> list[Metric]:
        return []  # the families vary with topics and groups; nothing to check up front

    def collect(self) -> Iterator[Metric]:
        m = self.m
        core = m._core
        topics: dict[str, Any] = {}
        if core is not None:
            for name in core.topic_names():
                config = core.topic_config(name)
                if config is not None:
                    topics[name] = config
            for table in (m.messages_in, m.bytes_in, m.messages_out, m.bytes_out):
                for gone in [t for t in table if t not in topics]:
                    del table[gone]  # a deleted topic's counters go with it
        yield from self._traffic()
        yield from self._requests()
        up = GaugeMetricFamily("skerry_ready", "1 once recovery finished and the listeners "
                               "are up; 0 while starting or stopping.")
        up.add_metric([], 1.0 if m.health.ready else 0.0)
        yield up
        implementation = GaugeMetricFamily(
            "skerry_implementation", "1 for the implementation of the per-message loops "
            "that runs: compiled (the C extensions) or python (the pure-Python twin, e.g. "
            "SKERRY_NO_EXTENSIONS=1 or no compiler at install time).", labels=["loops"])
        current = speedups.implementation()
        for kind in ("compiled", "python", "mixed"):
            implementation.add_metric([kind], 1.0 if kind == current else 0.0)
        yield implementation
        connections = GaugeMetricFamily("skerry_connections", "Open client connections, per "
                                        "transport.", labels=["transport"])
        for name, (factory, _) in m.transports.items():
            if factory is not None:
                connections.add_metric([name], float(len(factory.connections)))
        yield connections
        if core is not None:
            yield from self._partitions(core, m._replication, topics)
        if m._groups is not None:
            yield from self._groups(m._groups, m.broker_id)
        if m.control is not None:
            yield from self._control(m.control)

    @staticmethod
    def _control(control: Any) -> Iterator[Metric]:
        for name, help_text, value in (
            ("skerry_control_elections", "Leader elections this broker wrote as the "
             "controller (and forced elections it sent).", control.elections),
            ("skerry_control_unclean_elections", "Unclean elections this broker wrote as the "
             "controller: a leader from outside the ISR (committed messages may be lost).",
             control.unclean_elections),
            ("skerry_control_offline", "Partitions this broker, as the controller, found with "
             "no live replica in the ISR.", control.offline),
            ("skerry_control_preferred_elections", "Partitions this broker, as the "
             "controller, handed back to their preferred leader (the first replica).",
             control.preferred_elections),
        ):
            family = CounterMetricFamily(name, help_text)
            family.add_metric([], float(value))
            yield family
        is_controller = GaugeMetricFamily("skerry_control_is_controller",
                                          "1 while this broker is the controller.")
        is_controller.add_metric([], 1.0 if control.is_controller else 0.0)
        yield is_controller

    def _traffic(self) -> Iterator[Metric]:
        m = self.m
        for name, help_text, table in (
            ("skerry_messages_in", "Messages appended, per topic.", m.messages_in),
            ("skerry_bytes_in", "Record bytes appended (64-byte header, key and value, as "
                                "stored), per topic.", m.bytes_in),
            ("skerry_messages_out", "Messages read by consumers (CONSUME, Iggy polls), per "
                                    "topic.", m.messages_out),
            ("skerry_bytes_out", "Record bytes read by consumers (as stored), per topic.",
             m.bytes_out),
        ):
            family = CounterMetricFamily(name, help_text, labels=["topic"])
            for topic, value in sorted(table.items()):
                family.add_metric([topic], float(value))
            yield family

    def _requests(self) -> Iterator[Metric]:
        m = self.m
        counts = CounterMetricFamily(
            "skerry_requests", "Requests received, per transport and command (V1 and TANK "
            "commands, Kafka API and Iggy command names; INVALID: refused by the parser).",
            labels=["command", "transport"])
        for transport, (_, table) in m.transports.items():
            for command, value in sorted(table.items()):
                counts.add_metric([command, transport], float(value))
        yield counts
        latency = HistogramMetricFamily(
            "skerry_request_duration_seconds", "From the read that carried a V1 request to "
            "its reply queued for the socket, per command (pipelined PRODUCE: one "
            "observation per read, weighted by its requests).",
            labels=["command", "transport"])
        for command, histogram in sorted(m.latency.items()):
            latency.add_metric([command, "v1"], histogram.buckets(), histogram.total)
        yield latency

    def _partitions(self, core: BrokerCore, replication: ReplicationStatusView | None,
                    topics: dict[str, Any]) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        hw = GaugeMetricFamily("skerry_partition_high_watermark",
                               "Last committed offset (-1: none).", labels=labels)
        leo = GaugeMetricFamily("skerry_partition_log_end_offset",
                                "Next offset to be written.", labels=labels)
        start = GaugeMetricFamily("skerry_partition_log_start_offset",
                                  "Earliest retained offset.", labels=labels)
        size = GaugeMetricFamily("skerry_partition_size_bytes",
                                 "Bytes of record data in the partition's segments.",
                                 labels=labels)
        segments = GaugeMetricFamily("skerry_partition_segments", "Segment files.",
                                     labels=labels)
        isr = GaugeMetricFamily("skerry_partition_isr_size", "Replicas in sync.",
                                labels=labels)
        replicas = GaugeMetricFamily("skerry_partition_replicas",
                                     "Replication factor.", labels=labels)
        under = GaugeMetricFamily("skerry_partition_under_replicated",
                                  "1 when the ISR is smaller than the replication factor.",
                                  labels=labels)
        total_under = 0
        for name, config in sorted(topics.items()):
            rf = config.replication_factor
            for p in range(config.partitions):
                summary = core.partition_summary(name, p)
                key = [name, str(p)]
                leo.add_metric(key, float(summary.next_offset))
                start.add_metric(key, float(summary.first_offset))
                size.add_metric(key, float(summary.size_bytes))
                segments.add_metric(key, float(summary.segment_count))
                replicas.add_metric(key, float(rf))
                try:
                    info = replication.describe(name, p) if replication is not None else None
                except SkerryError:
                    info = None
                if info is None:
                    hw.add_metric(key, float(summary.next_offset - 1))
                    continue
                hw.add_metric(key, float(info.hw))
                isr.add_metric(key, float(len(info.isr)))
                under.add_metric(key, 1.0 if info.under_replicated else 0.0)
                total_under += bool(info.under_replicated)
        count = GaugeMetricFamily("skerry_under_replicated_partitions",
                                  "Partitions whose ISR is smaller than their replication "
                                  "factor.")
        count.add_metric([], float(total_under))
        yield from (hw, leo, start, size, segments, isr, replicas, under, count)

    def _groups(self, groups: GroupsView, broker_id: int) -> Iterator[Metric]:
        labels = ["group", "topic"]
        rebalances = CounterMetricFamily(
            "skerry_group_rebalances", "Rebalances of a group on a topic (its generation: "
            "every join, leave, eviction and partition change adds one).", labels=labels)
        members = GaugeMetricFamily("skerry_group_members", "Live members.", labels=labels)
        lag_total = GaugeMetricFamily("skerry_group_lag_total",
                                      "Messages committed but not yet committed by the "
                                      "group, summed over partitions.", labels=labels)
        lag = GaugeMetricFamily("skerry_group_lag", "hw + 1 - committed offset.",
                                labels=[*labels, "partition"])
        committed = GaugeMetricFamily("skerry_group_committed_offset",
                                      "Committed offset (the next one to read).",
                                      labels=[*labels, "partition"])
        coordinator = GaugeMetricFamily(
            "skerry_group_coordinator", "The broker coordinating the group (in a cluster "
            "each broker lists the groups it coordinates).", labels=labels)
        kind = GaugeMetricFamily(
            "skerry_group_info", "1 for each group on a topic; type is classic (JOIN/SYNC, "
            "Kafka classic, Iggy) or consumer (KIP-848, GROUP_HEARTBEAT).",
            labels=[*labels, "type"])
        epoch = GaugeMetricFamily("skerry_group_epoch", "A consumer (KIP-848) group's group "
                                  "epoch.", labels=labels)
        member_epoch = GaugeMetricFamily("skerry_group_member_epoch", "Each member's epoch "
                                         "in a consumer (KIP-848) group.",
                                         labels=[*labels, "member"])
        member_partitions = GaugeMetricFamily(
            "skerry_group_member_partitions", "Partitions of the topic a consumer (KIP-848) "
            "group's member owns (state=assigned) or waits for another member to give up "
            "(state=pending).", labels=[*labels, "member", "state"])
        for group, topic in groups.list_groups():
            try:
                info = groups.describe(group, topic)
            except SkerryError:
                continue
            group_type = getattr(info, "type", "classic")
            kind.add_metric([group, topic, group_type], 1.0)
            if group_type == "consumer":
                epoch.add_metric([group, topic], float(info.group_epoch))
                pending = dict(info.pending)
                for member_id, member_epoch_value in info.member_epochs:
                    member_epoch.add_metric([group, topic, member_id],
                                            float(member_epoch_value))
                for member_id, owned in info.members:
                    member_partitions.add_metric([group, topic, member_id, "assigned"],
                                                 float(len(owned)))
                    member_partitions.add_metric([group, topic, member_id, "pending"],
                                                 float(len(pending.get(member_id, ()))))
            rebalances.add_metric([group, topic], float(info.generation))
            members.add_metric([group, topic], float(len(info.members)))
            coordinator.add_metric([group, topic], float(broker_id))
            lag_total.add_metric([group, topic], float(sum(info.lag)))
            for p, offset, behind in zip(info.partitions, info.committed, info.lag,
                                         strict=True):
                lag.add_metric([group, topic, str(p)], float(behind))
                committed.add_metric([group, topic, str(p)], float(offset))
        yield from (rebalances, members, lag_total, lag, committed, coordinator, kind, epoch,
                    member_epoch, member_partitions)
