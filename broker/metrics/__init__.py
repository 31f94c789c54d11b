"""Metrics and health of one broker: the registry, what feeds it, and its HTTP endpoint.

Owns:

- ``BrokerMetrics``: a private ``prometheus_client.CollectorRegistry`` per broker. The hot
  paths feed plain ints and lock-free histograms on the reactor thread, once per batch or
  per read, never per message: messages and bytes in (``broker.core.produce``) and out
  (``broker.core.reads``) per topic, requests and their latency per command
  (``broker.v1.protocol``; pipelined PRODUCE runs are counted in bulk and timed once per read,
  weighted by their count). fsync latency comes from the group committer's thread through a
  ``prometheus_client.Histogram`` (thread-safe; one observation per fsync). Everything else
  is read when Prometheus scrapes, by a custom collector: connections, per-partition
  offsets, size, ISR size and under-replication, and per-group lag, members and rebalances.
- ``Health``: ``starting`` until recovery finished and every listener is up, then
  ``ready``, then ``stopping`` once shutdown begins.
- The HTTP endpoint on the broker's ``host`` and ``metrics_port`` (twisted.web on the
  broker's reactor): ``/metrics`` (Prometheus text format) and ``/health`` (200 ``ready``,
  else 503 with the state). ``StartupResponder`` answers 503 ``starting`` on the same
  socket from a plain thread while the store recovers (the reactor is not running yet);
  the reactor then adopts that socket, so no connection is refused in between.
- Securing it like the V1 listener: with ``tls.cert``/``tls.key`` both the endpoint and the
  startup responder speak HTTPS only; with ``auth.tokens_file`` (``HttpAuth``) ``/metrics``
  wants the V1 users' credentials, as HTTP Basic (user and token) or ``Bearer <token>``,
  checked in constant time by ``broker.auth.TokenStore``, and a refusal (401) is answered
  after ``broker.auth.FIRST_DELAY_S`` on the reactor clock. ``/health`` stays open for
  load balancers' and orchestrators' probes (it tells the state and nothing else). Like
  the V1 listener, the endpoint refuses a non-loopback address without authentication.

Latency is measured on the broker's clock (monotonic in ``skerry serve``; ``task.Clock`` in
tests): from the read that carried a request to its reply being queued, in order, for the
socket.

Must not import: the store, groups or replication modules directly, or ``broker.v1.protocol``
(which calls in here); it reads the objects it is given (``BrokerCore``, ``V1Factory``, the
group and replication services, typed by the small protocols below) through their public
methods, at scrape time, on the reactor thread.

Modules, one job each: ``registry`` (``BrokerMetrics`` and its scrape-time collector), ``health``
(``Health``), ``auth`` (``HttpAuth``), ``web`` (the twisted.web endpoint, ``MetricsService``),
``startup`` (``StartupResponder``, the plain-thread HTTP(S) server used before the reactor runs).
"""

from __future__ import annotations

from broker.metrics.auth import HttpAuth
from broker.metrics.health import Health
from broker.metrics.registry import FSYNC_BUCKETS, REQUEST_BUCKETS, BrokerMetrics
from broker.metrics.startup import StartupResponder, open_startup_listener, startup_tls_context
from broker.metrics.web import MetricsService

__all__ = ["BrokerMetrics", "Health", "HttpAuth", "MetricsService", "StartupResponder",
           "open_startup_listener", "startup_tls_context", "REQUEST_BUCKETS", "FSYNC_BUCKETS"]
