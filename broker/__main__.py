"""``python -m broker`` is the ``skerry`` command."""

import sys

from broker.cli import main

sys.exit(main())
