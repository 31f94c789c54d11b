"""The TANK transport (phaistos-networks/TANK's binary protocol, spec/tank-notes.md).

So far only the pure pieces exist: ``broker.tank.codec`` (the server's sans-I/O codec) and
``broker.tank.client`` (an independent Python client codec used to check it). The Twisted
protocol, the handlers and the store mapping come later (docs/tank.md).

Must not import: Twisted, ``broker.core``, the store; this package file imports nothing.
"""
