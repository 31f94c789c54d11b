"""The service shells: Twisted-side owners of domain state (timers, Deferreds, persistence),
built by the broker's shell (``broker.server``) and handed to the core and the transports.
Owns nothing itself; its modules:

* ``groups``: ``GroupService``, consumer groups' timers and ``groups.json``/``offsets.json``;
* ``replication``: ``ReplicationService`` and its jobs;
* ``iggy_catalog``: the Iggy streams, topics and consumer groups over the store's topics
  (``iggy.json``);
* ``iggy_users``: the Iggy users, their permissions and personal access tokens
  (``iggy-users.json``);
* ``host_facts``: the process and host facts the Iggy GetStats command reports;
* ``errors``: the Iggy services' refusals, in their own words (no wire codes).

A transport parses, formats and calls these (and the core); it never reads or writes a
file itself.

Must not import: the transports' protocols and handlers (the one edge into a transport is
``iggy_users``' use of the Iggy codec's ``Permissions`` value, whose blob is also its
stored form).
"""
