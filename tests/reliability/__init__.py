"""Reliability and security suites (fast CI versions; bench/reliability.py runs the long ones)."""
