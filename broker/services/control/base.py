"""What every part of the control plane shares: its logger, the pause before retrying an
etcd call, the etcd failures that mean "not now", and running a coroutine whose errors are
logged rather than lost.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from twisted.internet.defer import Deferred

from broker.services.etcd import EtcdError, EtcdUnavailable, OutcomeUnknown

__all__ = ["log", "RETRY_S", "ETCD_FAILURES", "run_logged"]

log = logging.getLogger("skerry.control")

RETRY_S = 0.5
"""Pause before retrying an etcd call that could not be made (etcd unreachable)."""

ETCD_FAILURES = (EtcdUnavailable, OutcomeUnknown, EtcdError)
"""etcd could not be reached, did not answer, or refused the call."""


def run_logged(coro: Coroutine[Any, Any, Any]) -> Deferred[Any]:
    """Run ``coro``; a failure is logged with its traceback (nobody waits for it)."""
    d = Deferred.fromCoroutine(coro)
    d.addErrback(lambda f: log.error("control plane: %s", f.getTraceback()))
    return d
