"""The binary core store: topics, partition logs of Iggy-format records, recovery.

Entry point: ``data.store.Store``. Layout of bytes: ``data.format``; of files:
``data.paths``; everything for operators: ``docs/storage.md``.

Must not import: Twisted, sockets, groups, replication (the store knows nothing of them).
"""
