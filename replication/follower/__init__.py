"""The follower's side of a multi-broker cluster: fetch loops and leader probes.

Owns:

- ``PartitionFetcher``: the fetch loop of one follower replica. A *session* starts by
  asking every other replica for its epoch (``REPLICA_EPOCH``), choosing the leader (the
  replica in leader role with the highest epoch, never older than one this replica knows),
  truncating the local log where it diverges from that leader (KIP-101: the leader says
  where this replica's latest epoch ends), then pulling (``REPLICA_PULL``, long-polling with
  ``wait_ms``) and appending the leader's records unchanged. Each pull reports the fetch
  position, so the leader's ISR and ``hw`` move; each answer carries the leader's ``hw``.
  Any error, a NOT_LEADER or a newer epoch ends the session; a new one starts at once, or
  after ``retry_backoff_ms`` when no leader answered;
- ``LeaderProbe``: what a leader does about its epoch. It tells every other replica its
  epoch (fencing a deposed leader, waking followers) and, for a leadership restored from
  disk, confirms it once every other replica answered without a newer epoch; one with a
  newer epoch fences this broker instead. A replica it cannot reach that has not fetched
  since the promotion leaves the ISR at once (the old leader, usually, after a failover).
  Another replica leading the same epoch (an operator mistake) makes this one refuse
  writes until the conflict is gone;
- ``ReplicaManager``: one fetcher per follower partition and one probe per new leader
  epoch, kept in step with the partitions' roles;
- the ports they code against: ``ReplicaLinks``/``LeaderLink`` (the network: epoch
  queries, a connection to the leader for pulls), ``ReplicaView``/``ReplicaDirectory``
  (the partitions, ``broker.services.replication``).

The state machine of a fetcher is ``FetcherState`` with its table ``FETCHER_TRANSITIONS``.
Every timer and reply callback captures the session generation and ignores stale firings.

Modules: ``links`` (the network port), ``fetcher`` (the fetch loop), ``probe`` (the leader
probe), ``manager`` (``ReplicaManager``). This package is the only Twisted piece of
``replication``. The broker fills the network port with V1 (``broker.peer_links``:
connections, ``AUTH``, TLS, the cluster commands' requests and replies) and maps a peer's
wire answers onto ``replication.errors`` there. Must not import: ``broker``, the global
reactor (the clock and the links are injected), the store.
"""

from __future__ import annotations

from replication.follower.fetcher import (
    FETCHER_TRANSITIONS,
    FetcherState,
    FetchSettings,
    IllegalFetcherTransition,
    PartitionFetcher,
    ReplicaDirectory,
    ReplicaView,
)
from replication.follower.links import LeaderLink, ReplicaLinks
from replication.follower.manager import ReplicaManager
from replication.follower.probe import LeaderProbe

__all__ = [
    "LeaderLink",
    "ReplicaLinks",
    "FetcherState",
    "FETCHER_TRANSITIONS",
    "IllegalFetcherTransition",
    "PartitionFetcher",
    "LeaderProbe",
    "ReplicaManager",
    "ReplicaView",
    "ReplicaDirectory",
    "FetchSettings",
]
