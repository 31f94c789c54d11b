"""The Kafka transport: Kafka's binary protocol (request versions of the 0.8.2-0.10.1
clients, message format magic 0 and 1) in front of Skerry's store and groups.

So far only ``broker.kafka.codec`` exists (pure bytes <-> frozen dataclasses); the Twisted
connection, the handlers and the Kafka group coordinator come later. The contract is
``spec/kafka-wire-notes.md``; ``docs/kafka.md`` says what is implemented.

Must not import: Twisted, the core, the store (this package file imports nothing).
"""
