"""The broker's web console: pages and a JSON API over the broker's own state.

``ConsoleService`` (``broker.console.web``) is what the shell builds when ``console_port``
is set; ``docs/console.md`` describes the pages and the API. Modules: ``views`` (the JSON
documents), ``history`` (lag and rate samples over the last hour), ``cluster`` (the seam to
the cluster's view), ``web`` (twisted.web resources and the listener), ``static/`` (the
pages: HTML, CSS and JavaScript served by the broker itself).
"""

from broker.console.web import ConsoleService

__all__ = ["ConsoleService"]
