"""A broker process whose file layer fails on request, for disk-fault runs over real TCP.

``python -m tests.reliability.faulty_broker <config.yaml> <fault.json>`` serves like
``skerry serve`` (same wiring through ``broker.server.build_broker``, monotonic reactor
clock, the same "skerry listening on ..." line, clean shutdown on SIGTERM) but over a
``tests.fakes.fs.FaultyFileLayer``. SIGUSR1 arms it with the arguments in ``fault.json``
(``FaultyFileLayer.arm`` keywords; ``error`` is an errno number); the first injected failure
is logged as "fault injected: <op> <path>".

Used by tests/reliability/diskfault_scenarios.py only. Must not be imported by the broker.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from typing import Any

from broker.config import load_config
from broker.server import build_broker, configure_logging
from tests.fakes.fs import FaultyFileLayer

log = logging.getLogger("skerry.faulty")


class _LoggingFaultyLayer(FaultyFileLayer):
    """Logs each injected failure (once per op and path) before raising it."""

    def __init__(self) -> None:
        super().__init__(armed=False)
        self._logged: set[tuple[str, str]] = set()

    def _before(self, op: str, fd: int | None, path: str,
                data: bytes | bytearray | memoryview | None = None) -> None:
        try:
            super()._before(op, fd, path, data)
        except OSError:
            if (op, path) not in self._logged:
                self._logged.add((op, path))
                log.warning("fault injected: %s %s", op, path)
            raise


def main(argv: list[str]) -> int:
    config_path, fault_path = argv
    config = load_config(config_path)
    with open(fault_path, encoding="utf-8") as handle:
        fault: dict[str, Any] = json.load(handle)
    configure_logging(config["log_level"])
    from twisted.internet import reactor, threads

    reactor.seconds = time.monotonic  # type: ignore[method-assign]
    fs = _LoggingFaultyLayer()
    broker = build_broker(config, reactor, run_in_thread=threads.deferToThread, fs=fs)
    addresses = broker.listen(reactor)

    def arm() -> None:
        fs.arm(**fault)
        log.warning("fault armed: %s", fault)

    signal.signal(signal.SIGUSR1, lambda *_: reactor.callFromThread(arm))
    log.info("skerry listening on %s", " ".join(addresses))
    reactor.addSystemEventTrigger("before", "shutdown", broker.stop)
    reactor.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
