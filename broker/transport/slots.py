"""A reply's place in a connection's order: the positional record a connection, its
handlers, the produce replies and the request metrics share, and the names of its places.

Owns: ``Slot`` and its positions. A slot is a plain ``list``: ``[reply, cid]`` when made
(``reply`` None until answered; ``cid`` the correlation id as bytes, V1 only), to which
``broker.metrics`` appends ``t0, weight, cmd`` when it times the request (Kafka's slots hold
only ``[reply]``). Every access goes through the position constants below, never a bare
number. Not a named record, because one is made per pipelined PRODUCE and the compiled
``fill_produce_ok`` (``broker/v1/_cscan.c``) fills it in place: measured with
``python -m timeit`` (docs/performance.md, "The transport kit"), a ``dataclass(slots=True)``
costs 3.6 times a list literal to create and a ``list`` subclass with properties twice as
much, its property reads six times an index; an index by a module constant costs what a
literal index does.

Must not import: anything of Skerry's (the transports and ``broker.metrics`` import it).
"""

from __future__ import annotations

__all__ = ["Slot", "REPLY", "CID", "T0", "WEIGHT", "CMD", "LANE_TAG", "LANE_T0"]

Slot = list
"""``[reply, cid]``, stamped to ``[reply, cid, t0, weight, cmd]`` when timed."""

REPLY = 0
"""The reply line (bytes), None while the request waits for its answer."""
CID = 1
"""The correlation id, as bytes (what a PRODUCE reply echoes)."""
T0 = 2
"""When the request arrived (the metrics clock), present once stamped."""
WEIGHT = 3
"""How many requests the slot's answer stands for (a fast-path run's last slot: all)."""
CMD = 4
"""The command name the request is counted under."""

LANE_TAG = 2
"""In a slot of the V1 read lane while its answer is awaited (``broker/v1/_clane.c``): which
connection it belongs to (fd and registration); the lane removes it when it answers."""
LANE_T0 = 3
"""In a slot of the V1 read lane with metrics on: when its read arrived (removed with
``LANE_TAG``)."""
