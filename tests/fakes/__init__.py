"""Test-only stand-ins shared by the test suites (file layers that record or fail).

Must not import: Twisted, the broker.
"""
