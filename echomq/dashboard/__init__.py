"""The web dashboard: see a queue's time as the queue sees it, and act on its jobs.

Server-rendered pages with a little plain script (no build step; readable with scripts
off), live counts over Server-Sent Events, ``/metrics`` for Prometheus. Standalone with
``echomq dashboard`` (the standard library's ``http.server``), or mounted in an ASGI site
(``echomq.dashboard.asgi.dashboard_app``). Modules: ``routes`` (the access gate and the
dashboard's reads of its queues), ``router`` (the route table: every path and what answers
it), ``actions`` (what a POST does), ``api`` (the JSON), the page modules, which only
render: ``pages`` (the overview, queue, job, flow and group pages), ``schedule_pages`` (the
schedule clock and registrations), ``task_pages``, ``worker_pages``, ``backoff_pages``
(retry policies and the backoff explorer), ``layout`` (the frame every page is drawn in,
and the small pages), ``charts`` (SVG); ``insight`` (every bounded read the pages show),
``access`` (Host/Origin/token rules), ``prometheus`` (``/metrics``), ``stdlib`` and
``asgi`` (the two servers), ``web`` (request/response); the stylesheet and script are in
``static``.

Clocks: job times are SERVER ms (the schedule, leases, completion and death); registration
times are HOST ms (the registry's clock). Pages show UTC, and the browser's zone beside it.
"""

from __future__ import annotations

from echomq.dashboard.access import Access
from echomq.dashboard.routes import Dashboard, queues_to_show
from echomq.dashboard.stdlib import DashboardServer, serve

__all__ = ["Access", "Dashboard", "DashboardServer", "queues_to_show", "serve"]
