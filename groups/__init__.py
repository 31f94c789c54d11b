"""Consumer groups, the pure domain part: state machine, assignors, coordinator rules and
the JSON shapes of ``groups.json``/``offsets.json`` (see docs/groups.md).

Must not import: Twisted, the global reactor, anything that does I/O or reads a clock. The
Twisted shell is ``broker/services/groups.py``.
"""
