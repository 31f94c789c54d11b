"""The transport kit: the machinery the four transports (V1, Iggy, Kafka, TANK) share
instead of each keeping its own copy.

- ``errors``: ``ErrorTable``, exception class -> wire code, one ``__mro__`` walk per class,
  cached; each transport's ``errors`` module fills one with its codes.
- ``frames``: ``FrameSplitter``, the length-prefixed splitter Iggy, Kafka and TANK frame
  their requests with.
- ``boundary``: ``Boundary``, the dispatch boundary: every exception answered in the
  transport's shape (INTERNAL for a bug), the shutting-down check, requests per command.
- ``slots``: ``Slot``, a reply's place in a connection's order (a list), and the names of
  its positions (``REPLY``, ``CID``, ``T0``, ``WEIGHT``, ``CMD``).
- ``listeners``: ``Listener``, one transport's listening socket, which ``broker.server``
  loops over to listen, refuse and wait.

Sans-I/O: nothing here imports Twisted or reads a socket (the connection base is
``broker.connection``).

Must not import: Twisted, the core, the store, groups, replication, any transport.
"""
