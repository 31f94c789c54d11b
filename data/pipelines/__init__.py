"""Example Spark pipelines over Skerry topics (run with ``skerry pipeline ...``)."""
