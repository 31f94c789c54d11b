"""Skerry's version, in one place: what ``skerry --version``, ``/health`` and the console
say.

Owns: ``skerry_version()``, the installed ``skerry`` distribution's version (from
``pyproject.toml``, through the package metadata), ``unknown`` when it is not installed.

A neutral module: the CLI, the metrics endpoint and the console import it. Must not import:
anything of Skerry, Twisted.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata

__all__ = ["skerry_version"]


@cache
def skerry_version() -> str:
    """The installed ``skerry`` distribution's version (``unknown`` when not installed)."""
    try:
        return metadata.version("skerry")
    except metadata.PackageNotFoundError:
        return "unknown"
