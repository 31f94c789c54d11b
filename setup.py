"""The optional compiled extensions; everything else is in pyproject.toml.

The extensions (``data._cspeedups``, ``broker.v1._cscan``, ``broker.v1._clane``,
``broker.kafka._cfetch``) are ``optional``: where no C compiler works (``CC=false``, no gcc), setuptools
warns and installs the package without them, and ``data.speedups`` runs the pure-Python twin.
``SKERRY_NO_EXTENSIONS=1`` at build time skips the build altogether (docs/performance.md).
"""

import os

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("SKERRY_NO_EXTENSIONS", "") in ("", "0"):
    # depends: also what puts a shared header into the sdist (tests/test_packaging.py)
    ext_modules.append(Extension("data._cspeedups", ["data/_cspeedups.c"],
                                 depends=["data/_int64_ends.h"],
                                 extra_compile_args=["-O2"], optional=True))
    ext_modules.append(Extension("broker.v1._cscan", ["broker/v1/_cscan.c"],
                                 depends=["broker/v1/_produce_line.h"],  # shared with _clane
                                 extra_compile_args=["-O2"], optional=True))
    ext_modules.append(Extension("broker.v1._clane", ["broker/v1/_clane.c"],
                                 depends=["broker/v1/_produce_line.h"],
                                 extra_compile_args=["-O2"], optional=True))
    ext_modules.append(Extension("broker.kafka._cfetch", ["broker/kafka/_cfetch.c"],
                                 include_dirs=["data"],  # data/_int64_ends.h, shared
                                 depends=["data/_int64_ends.h"],
                                 extra_compile_args=["-O2"], optional=True))

setup(ext_modules=ext_modules)
