"""The reactor ``skerry serve`` runs: Twisted's epoll reactor with a leaner event dispatch.

Owns: ``LeanEPollReactor`` and ``install_reactor()`` (called by ``broker.server.run`` before
anything imports ``twisted.internet.reactor``).

Why: under request/response load (docs/performance.md, rows (a), (d), (e)) every request is
one read event, and Twisted's ``doPoll`` wraps each event in ``log.callWithLogger`` (a
logging context: ``callWithContext`` twice, a dict merge, ``logPrefix()``) before
``_doReadOrWrite`` looks at the event bits. Five Python frames per event that Skerry does
not need: it logs through ``logging``, not Twisted's context-keyed ``system``.

What changes, and what does not: an event that is exactly "readable" (``EPOLLIN``, the
common case) calls ``doRead()`` directly; for a plain TCP connection it does what
``doRead`` does itself (``recv`` of at most ``READ_BYTES``, EOF, ``dataReceived``), two
frames fewer and, above all, without a 1 MiB read buffer per small request
(``READ_BYTES``); a connection whose read filled ``READ_BYTES`` reads up to its
``bufferSize`` next, as Twisted does, until a read comes back short. Every other event (writable, hang-up, error,
several bits at once) goes through Twisted's own ``_doReadOrWrite`` inside
``callWithLogger`` as before. The semantics of the fast path are Twisted's: a selectable
whose ``fileno()`` is -1 is disconnected; an exception from ``doRead`` is logged through
Twisted's log (inside ``callWithLogger``, as Twisted does) and disconnects that selectable
only; a ``doRead`` that returns a reason (EOF: ``ConnectionDone``) disconnects it with
``inRead`` set, so a half-closeable protocol gets ``readConnectionLost`` and answers what it
read first.

A read lane (``read_lanes``, ``broker.v1.lane``) may see the turn's events first: it serves
the reads it can in one call and gives back the rest and the bytes it read, which go to
``dataReceived`` as a read here would.

Must not import: the store, the core, any transport (it knows Twisted, not Skerry).
"""

from __future__ import annotations

import errno
import sys
from select import EPOLLIN
from typing import Any

from twisted.internet import main, tcp
from twisted.internet.epollreactor import EPollReactor
from twisted.internet.posixbase import _NO_FILEDESC
from twisted.python import log
from twisted.python.failure import Failure

__all__ = ["LeanEPollReactor", "install_reactor", "READ_BYTES", "BULK"]

READ_BYTES = 65536
"""Most bytes one read of a TCP connection takes, unless its previous read filled it
(Twisted's default ``bufferSize``; ``BULK``).

Twisted's ``tcp.Connection.doRead`` reads ``self.bufferSize`` bytes, the same attribute its
``write`` compares the unsent output with before pausing the producer. Skerry sets that to
``limits.max_pending_output_bytes`` (1 MiB) for flow control, which made every read
allocate a 1 MiB buffer: above malloc's mmap threshold, so each request cost an ``mmap``, an
``mremap`` (the bytes object shrunk to what was read) and a ``munmap``, and a page fault
(docs/performance.md, "Durable produce against Redis", 2026-11-27 22:55 UTC)."""

_PLAIN_TCP = frozenset(kind for kind in (tcp.Server, tcp.Client)
                       if kind.doRead is tcp.Connection.doRead
                       and kind._dataReceived is tcp.Connection._dataReceived)
"""The transports whose read the fast path does itself (``recv``, EOF, ``dataReceived``:
what ``tcp.Connection.doRead`` does, with ``READ_BYTES``); empty if Twisted changes it."""


BULK = "_lean_bulk"
"""The attribute the fast path sets on a transport whose last read filled ``READ_BYTES``:
its next read takes up to the transport's ``bufferSize`` (a large request or a pipelined
stream keeps Twisted's large reads, where one buffer per read is cheap against what it
carries); a read below ``READ_BYTES`` clears it. Kept on the transport, not in a set of fds
in the reactor, so it goes with the connection (a reused fd starts small)."""


class LeanEPollReactor(EPollReactor):
    """``EPollReactor`` whose plain read events skip the per-event logging context."""

    def __init__(self) -> None:
        self.read_lanes: list[Any] = []
        """What this turn's events go to first (``broker.v1.lane.ReadLane``, added by the
        server when it can run): each lane's ``take(events) -> (rest, reads)`` does the
        reads it can serve itself and gives back the events still to dispatch and the
        ``(fd, bytes)`` it read for a connection's ``dataReceived``."""
        super().__init__()

    def doPoll(self, timeout: float | None) -> None:
        if timeout is None:
            timeout = -1
        try:
            events = self._poller.poll(timeout, len(self._selectables))
        except OSError as err:
            if err.errno == errno.EINTR:
                return
            raise
        selectables = self._selectables
        for lane in self.read_lanes:
            if not events:
                break
            try:
                events, reads = lane.take(events)
            except BaseException:  # a bug in the lane: logged; epoll (level-triggered)
                log.err(Failure(), "the read lane failed")  # reports the events again
                return
            for fd, data in reads:
                selectable = selectables.get(fd)
                if selectable is not None:
                    self._received(selectable, data)
        for fd, event in events:
            selectable = selectables.get(fd)
            if selectable is None:
                continue
            if event != EPOLLIN:  # writable, hang-up, error or several: Twisted's own way
                log.callWithLogger(selectable, self._doReadOrWrite, selectable, fd, event)
                continue
            why: Any = None
            try:
                if selectable.fileno() == -1:
                    why = _NO_FILEDESC
                elif type(selectable) in _PLAIN_TCP:
                    state = selectable.__dict__
                    bulk = state.get(BULK)
                    try:
                        data = selectable.socket.recv(
                            selectable.bufferSize if bulk else READ_BYTES)
                    except OSError as err:
                        if err.args[0] != errno.EWOULDBLOCK:
                            why = main.CONNECTION_LOST
                    else:
                        if len(data) >= READ_BYTES:
                            state[BULK] = True  # a stream: its next read may take bufferSize
                        elif bulk:
                            state[BULK] = False
                        if data:
                            selectable.protocol.dataReceived(data)
                        else:
                            why = main.CONNECTION_DONE
                else:
                    why = selectable.doRead()
            except BaseException:
                why = sys.exc_info()[1]
                log.callWithLogger(selectable, log.err, Failure())
            if why:
                log.callWithLogger(selectable, self._disconnectSelectable, selectable, why,
                                   True)

    def _received(self, selectable: Any, data: bytes) -> None:
        """Bytes the read lane read for ``selectable``: what the loop above does with a
        ``recv``'s bytes (the ``BULK`` mark, ``dataReceived``, a failure disconnects)."""
        try:
            if len(data) >= READ_BYTES:
                selectable.__dict__[BULK] = True
            selectable.protocol.dataReceived(data)
        except BaseException:
            why = sys.exc_info()[1]
            log.callWithLogger(selectable, log.err, Failure())
            log.callWithLogger(selectable, self._disconnectSelectable, selectable, why, True)

    doIteration = doPoll


def install_reactor() -> bool:
    """Install ``LeanEPollReactor`` as the global reactor; False (and nothing done) when a
    reactor is already installed (``twisted.internet.reactor`` was imported)."""
    if "twisted.internet.reactor" in sys.modules:
        return False
    from twisted.internet.main import installReactor

    installReactor(LeanEPollReactor())
    return True
