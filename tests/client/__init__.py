"""Tests of the Python client, ``broker.client``."""
