"""The Kafka transport's shell: builds its objects over the broker's core and listens.

Owns: ``KafkaService`` (the ``Context``, the handlers and the factory over one
``BrokerCore``; the listener; the node facts Metadata reports: the broker id of a
cluster member, else 0, and the address the listener is bound to). With
``auth.tokens_file`` every Kafka connection logs in with SASL PLAIN as one of its users
(``broker.kafka.sasl``; the client's ``security.protocol=SASL_PLAINTEXT`` or
``SASL_SSL``), which is also what lets the listener bind a non-loopback ``host`` (the
broker's bind rule). With ``tls.cert``/``tls.key`` set it speaks TLS like the other
listeners (``SSL``, or ``SASL_SSL`` with a login).

The group service slot (``Context.groups``) is filled by whoever builds the Kafka group
service (``groups=`` here).

In a cluster, ``ClusterPlacement`` tells Kafka clients what they need (``Context.placement``):
every live broker's Kafka address (``cluster.kafka_brokers``: Kafka's advertised listeners),
each partition's leader, replicas and ISR (from etcd's records when ``cluster.etcd`` is set,
else from the replication service's view of the operator's roles), and each group's
coordinator: on etcd the leader of the group's partition of ``__skerry_groups``
(``coordinators``), in the operator mode (no etcd) the live broker of lowest id.

Must not import: the global reactor (it comes as an argument to ``listen``), the file
layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.interfaces import IReactorTime

from broker.auth import TokenStore
from broker.core import BrokerCore
from broker.kafka.handlers import Context, KafkaHandlers, NodeInfo
from broker.kafka.handlers.context import PartitionPlacement, Placement
from broker.kafka.protocol import KafkaFactory
from broker.transport.listeners import Listener

__all__ = ["KafkaService", "ClusterPlacement"]

log = logging.getLogger("skerry.kafka")


class ClusterPlacement:
    """``Placement`` over a cluster member's replication service (``leader_view``,
    ``describe``, ``is_leader``) and, with etcd, its control plane (module docstring)."""

    def __init__(self, core: BrokerCore, cluster: Any, replication: Any,
                 control: Any = None) -> None:
        self.core = core
        self.cluster = cluster
        self.replication = replication
        self.control = control
        self.coordinators: Any = None
        """``broker.services.coordinators.CoordinatorPartitions`` when group state is the
        cluster's (etcd): each group's coordinator is its partition's leader."""
        self._nodes = {b: NodeInfo(b, a.host, a.port)
                       for b, a in sorted(cluster.kafka_brokers.items())}

    def brokers(self) -> Sequence[NodeInfo]:
        if self.control is None:
            return list(self._nodes.values())
        live = self.control.view.brokers
        me = self.cluster.broker_id
        # This broker answers, so it is alive even while its own registration is renewed.
        return [n for b, n in self._nodes.items() if b in live or b == me]

    def partition(self, topic: str, partition: int) -> PartitionPlacement:
        if self.control is not None:
            view = self.control.view
            state = view.partitions.get((topic, partition))
            if state is not None:
                return PartitionPlacement(state.leader, tuple(view.replicas(topic, partition)),
                                          tuple(state.isr), state.leader_epoch)
            return PartitionPlacement(-1, (), ())
        config = self.core.topic_config(topic)
        replicas = self.cluster.replicas(topic, partition,
                                         config.replication_factor if config else 1)
        leader, epoch = self.replication.leader_view(topic, partition)
        positions = self.replication.describe(topic, partition).isr
        isr = tuple(replicas[i] for i in positions if 0 <= i < len(replicas))
        return PartitionPlacement(leader, tuple(replicas), isr, epoch)

    def leads(self, topic: str, partition: int) -> bool:
        return bool(self.replication.is_leader(topic, partition))

    def coordinator(self, group_id: str | None = None) -> NodeInfo | None:
        if self.coordinators is not None and group_id is None:
            return self._nodes.get(self.cluster.broker_id)  # each lists its own groups
        if self.coordinators is not None and group_id is not None:
            routing = self.coordinators.route(group_id)
            if routing.route.value in ("local", "loading"):
                return self._nodes.get(self.cluster.broker_id)
            return None if routing.broker is None else self._nodes.get(routing.broker)
        live = self.brokers()
        return live[0] if live else None

    def loading(self, group_id: str) -> bool:
        return self.coordinators is not None and \
            self.coordinators.route(group_id).route.value == "loading"

    def controller(self) -> int:
        if self.control is not None:
            controller = self.control.controller
            return -1 if controller is None else int(controller)
        coordinator = self.coordinator()
        return -1 if coordinator is None else coordinator.broker_id


class KafkaService:
    """The Kafka binary transport over one broker core."""

    def __init__(self, core: BrokerCore, config: Any, clock: IReactorTime, *,
                 now_us: Callable[[], int], groups: Any = None,
                 placement: Placement | None = None, tokens: TokenStore | None = None) -> None:
        self.core = core
        self.config = config
        cluster = config.cluster
        self.node = NodeInfo(broker_id=cluster.broker_id if cluster is not None else 0)
        self.ctx = Context(core, node=self.node, clock=clock, now_us=now_us,
                           max_message_bytes=config["limits.max_message_bytes"],
                           auto_create_topics=config["auto_create_topics"], groups=groups,
                           placement=placement, fetch_max_bytes=config["kafka.fetch_max_bytes"])
        self.handlers = KafkaHandlers(self.ctx)
        self.factory = KafkaFactory(
            self.handlers, clock,
            max_frame_bytes=config["kafka.max_frame_bytes"],
            max_connections=config["limits.max_connections"],
            idle_timeout_ms=config["limits.idle_timeout_ms"],
            max_pending_output_bytes=config["limits.max_pending_output_bytes"],
            tokens=tokens)

    @property
    def listener(self) -> Listener:
        """The Kafka listener (``broker.transport.listeners``): Metadata then advertises
        ``kafka.advertised``, else the bound address (``ValueError`` for a wildcard address
        without ``kafka.advertised``: clients cannot connect to 0.0.0.0; in a cluster
        ``cluster.kafka_brokers`` says where each broker is)."""
        return Listener("kafka", "kafka_port", self.factory, before=self._check_host,
                        bound=self._advertise)

    def listen(self, reactor: Any, host: str, port: int) -> Any:
        """Listen on ``host``:``port`` (``listener``); returns the listening port."""
        return self.listener.listen(reactor, host, port)

    def _check_host(self, host: str) -> None:
        advertised = self.config["kafka.advertised"]
        if advertised is None and host in ("0.0.0.0", "::", "") and self.ctx.placement is None:
            raise ValueError(f"kafka.advertised: required with host {host!r}: Kafka clients "
                             "connect to the address Metadata gives them, and a wildcard "
                             "address is none (docs/kafka.md)")

    def _advertise(self, address: Any) -> None:
        advertised = self.config["kafka.advertised"]
        if advertised is None:
            self.node.host, self.node.port = address.host, address.port
        else:
            name, _, number = advertised.rpartition(":")
            self.node.host, self.node.port = name.strip("[]"), int(number)

    def stop(self) -> None:
        """Refuse new connections."""
        self.factory.refusing = "broker is shutting down"

    def all_idle(self) -> bool:
        return self.factory.all_idle()
