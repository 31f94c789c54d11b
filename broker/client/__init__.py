"""The Python client of the V1 protocol, used by the ``skerry`` commands, the harness and the
Spark connector."""
