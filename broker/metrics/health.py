"""``Health``: ``starting`` until recovery finished and every listener is up, then ``ready``,
then ``stopping``; ``health_answer`` is what ``/health`` says about it.

Must not import: Twisted, the store.
"""

from __future__ import annotations

from broker.version import skerry_version


class Health:
    """``starting`` -> ``ready`` -> ``stopping``."""

    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"

    def __init__(self) -> None:
        self.state = self.STARTING

    @property
    def ready(self) -> bool:
        return self.state == self.READY


def health_answer(health: Health) -> tuple[int, bytes, bytes]:
    """``/health``: 200 ``ready``, else 503 and the state (``starting``, ``stopping``), on
    the first line; the second says which Skerry answers (``skerry 0.1.0``)."""
    return (200 if health.ready else 503), b"text/plain; charset=utf-8", \
        b"%s\nskerry %s\n" % (health.state.encode(), skerry_version().encode())
