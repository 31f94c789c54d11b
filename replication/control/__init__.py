"""The cluster control plane's pure rules (the contract: the spec's "Cluster control plane
on etcd"): what Skerry stores in etcd and how it decides leadership and ISR changes.

Modules:

* ``keys``: the key layout under ``/skerry/<cluster id>/`` and the JSON values;
* ``election``: the controller's leader election for one partition;
* ``isr``: the committed / pending ISR rule (Kafka KIP-497);
* ``txn``: etcd transactions as plain data, and the builders of every txn Skerry sends;
* ``errors``: the control plane's refusals.

Must not import: Twisted, ``broker``, ``time``, sockets or files. Nothing here performs I/O:
the etcd client (``broker.services.etcd``) sends the txns built here and hands the answers
back as plain values.
"""
