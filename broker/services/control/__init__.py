"""The control plane's Twisted shell: a broker's session with etcd (``cluster.etcd``).

The contract is the spec's "Cluster control plane on etcd"; the rules are pure, in
``replication.control``; the etcd client is ``broker.services.etcd``. The public service is
``ControlPlane`` (``service``); ``server.build_broker`` builds one when ``cluster.etcd`` is
set and keeps it on ``Broker.control`` (None otherwise: the operator-driven mode).

Public API (what the transports' admin commands, METADATA and the CLI call):

``await control.create_topic(name, partitions, replication_factor, min_isr=None,
settings=None) -> (term, index)``
    One txn (``CREATE(topics/<t>) == 0``) with the topic and every partition key; every
    broker creates its logs from the watch (this one at once). ``BadRequest`` for a bad
    name or shape or an existing topic; ``Unavailable`` when etcd cannot be reached;
    ``OutcomeUnknown`` (``broker.services.etcd``) when the txn may have committed.
``await control.delete_topic(name) -> (term, index)`` and
``await control.add_partitions(name, count) -> (term, index)``
    The same for deleting a topic and growing it.
``await control.elect(topic, partition, leader, isr=None) -> (term, index)``
    The operator's forced election: ``leader`` leads ``leader_epoch + 1``, fenced like an
    automatic election (the controller's epoch is compared when this broker is the
    controller; the key's mod revision always). Refuses (``BadRequest``) a leader that is
    not a live replica, or is outside the committed ISR unless unclean election is on for
    the topic (or the cluster). ``isr``: broker ids, a subset of the committed ISR with the
    leader (None: the committed ISR's live members).
``control.metadata() -> ClusterMetadata``
    Live brokers with their addresses, the controller and its epoch, topics, and every
    partition's leader, epoch, ISR and replicas, as this broker's watch last saw them, plus
    ``term``/``index``.
``control.leader_of(topic, partition) -> (broker_id, "host:port", epoch) | None``
    The leader etcd names (None: unknown or offline). The address is the leader's
    registration, or the address book's when it has none.
``control.term_index() -> (term, index)``
    etcd's Raft term and the newest revision this broker saw (the admin replies'
    ``term=``/``index=``); ``await control.fetch_term_index()`` asks etcd now.
``control.registration(broker_id) -> BrokerRegistration | None`` and
``control.is_controller`` / ``control.controller``: the registration state the admin
    commands ``ADMIN_REGISTER_BROKER`` / ``ADMIN_BROKER_HEARTBEAT`` answer with.
``control.ready``
    A Deferred firing once this broker registered and read every key (tests and the CLI).

Must not import: the global reactor (clock and HTTP transport are injected), the
transports (``broker.v1`` ...), the store's modules (it reaches topics through
``LocalTopics``).
"""

from broker.services.control.service import (
    ClusterMetadata,
    ControlPlane,
    LocalTopics,
    PartitionInfo,
    ReplicaControl,
)

__all__ = ["ControlPlane", "ClusterMetadata", "PartitionInfo", "LocalTopics",
           "ReplicaControl"]
